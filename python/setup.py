"""`python3 -m pip install ./python`: the zen package (pure Python over libzen's C API, ctypes).

No compiled extension and no build-time download: it installs offline (a venv with
--system-site-packages sees Debian's numpy, mpi4py and torch). libzen itself comes from a zen build
or install; the package finds it through ZEN_LIBRARY, next to itself, or the system loader
(docs/python.md)."""
import os
import re

from setuptools import setup

here = os.path.dirname(os.path.abspath(__file__))


def version():
    """The one version of zen: project(zen VERSION ...) in ../CMakeLists.txt."""
    path = os.path.join(here, "..", "CMakeLists.txt")
    try:
        with open(path) as f:
            m = re.search(r"project\(zen VERSION ([0-9]+\.[0-9]+\.[0-9]+)", f.read())
    except OSError:
        m = None
    if not m:
        raise SystemExit(f"setup.py: cannot read zen's version from {path} (install from a zen source tree)")
    return m.group(1)


setup(
    name="zen",
    version=version(),
    description="zen: sparse gradient allreduce (Python over libzen's C API) and a torch.distributed backend",
    packages=["zen"],
    python_requires=">=3.9",
    install_requires=["numpy"],
    extras_require={"mpi": ["mpi4py"], "torch": ["torch", "mpi4py"]},
    license="MIT",
)
