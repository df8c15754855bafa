"""zen: sparse gradient allreduce near the communication optimum, from Python.

Pure Python over the C API of libzen.so (ctypes; nothing compiled against Python or torch)::

    from mpi4py import MPI
    import zen
    comm = zen.Communicator.from_mpi(MPI.COMM_WORLD)
    plan = zen.SparseAllreduce(comm, size=1000, row_width=1, dtype="f32", scheme="auto")
    idx, val = plan.sparse(indices, values)          # or plan.dense(indices, values, out=None)
    print(plan.report())                             # scheme chosen and why, bytes per phase, bound_eff

``import zen.torch`` registers the torch.distributed backend "zen" (docs/python.md).

The library is searched for in this order: ``ZEN_LIBRARY`` (a file or a directory), next to the
package, the install prefix recorded by ``cmake --install`` (or the build tree's ``build/python``),
then the system loader; ``import zen`` fails with the list of places searched when none has it.
"""
from ._capi import (CudaError, Error, InternalError, InvalidArgumentError, InvalidUsageError,  # noqa: F401
                    LibraryNotFoundError, RemoteError, SystemFailureError, TimeoutError, UnsupportedError, lib)
from ._core import Communicator, Phase, Report, Request, SparseAllreduce, dtype_name  # noqa: F401

__version__ = lib().version
library_path = lib().path

__all__ = [
    "Communicator", "SparseAllreduce", "Request", "Report", "Phase", "dtype_name",
    "Error", "InvalidArgumentError", "InvalidUsageError", "SystemFailureError", "InternalError", "TimeoutError",
    "RemoteError", "CudaError", "UnsupportedError", "LibraryNotFoundError", "__version__", "library_path",
]
