"""zen's C API (include/zen/zen.h) through ctypes: finding libzen, the declarations of every entry
point the Python layer uses, the versioned option and report structs, and result codes turned into
exceptions (one class per zenResult_t, carrying the library's message).

Nothing here is compiled against Python or torch: the package talks to libzen.so only through its
C ABI, so any libzen of a compatible C API serves any Python and torch version.
"""
import ctypes
import ctypes.util
import os
import threading

# ---------------------------------------------------------------------------------------------
# Errors: zen.Error and one subclass per zenResult_t.


class Error(Exception):
    """A zen call failed. ``code`` is the zenResult_t value, ``result`` its name (e.g.
    ``"zenTimeout"``), ``call`` the C function (or Python operation) and ``message`` the library's
    text, which names the rank, the peer, the operation and its sequence number."""

    code = -1
    result = "zenError"

    def __init__(self, message, call=None, code=None):
        self.message = message
        self.call = call
        if code is not None:
            self.code = code
        super().__init__(f"{call}: {message}" if call else message)


class InvalidArgumentError(Error, ValueError):
    """zenInvalidArgument: bad input (index out of range, sizes, dtype, a NULL buffer, ...)."""
    code, result = 1, "zenInvalidArgument"


class InvalidUsageError(Error):
    """zenInvalidUsage: API misuse, ranks that disagree (shapes), or a communicator that already
    failed and refuses further use."""
    code, result = 2, "zenInvalidUsage"


class SystemFailureError(Error):
    """zenSystemError (renamed: Python's SystemError means an interpreter fault): allocation,
    I/O or MPI failure."""
    code, result = 3, "zenSystemError"


class InternalError(Error):
    """zenInternalError: a bug in zen."""
    code, result = 4, "zenInternalError"


class TimeoutError(Error, TimeoutError):  # noqa: A001 - also a builtins.TimeoutError
    """zenTimeout: a peer did not take part within the communicator's timeout (the message names it)."""
    code, result = 5, "zenTimeout"


class RemoteError(Error):
    """zenRemoteError: another rank failed or aborted; the message names it and quotes its error."""
    code, result = 6, "zenRemoteError"


class CudaError(Error):
    """zenCudaError: CUDA or NCCL failure."""
    code, result = 7, "zenCudaError"


class UnsupportedError(Error):
    """zenUnsupported: a feature this build or backend does not have (the message says which)."""
    code, result = 8, "zenUnsupported"


ERRORS = {c.code: c for c in (InvalidArgumentError, InvalidUsageError, SystemFailureError, InternalError,
                               TimeoutError, RemoteError, CudaError, UnsupportedError)}


class LibraryNotFoundError(ImportError):
    """libzen could not be loaded; the message lists every place searched."""


# ---------------------------------------------------------------------------------------------
# Finding the library.

_SONAMES = ("libzen.so.0", "libzen.so")


def _candidates():
    """(where, path) pairs in search order: ZEN_LIBRARY, next to the package, the install prefix
    recorded at install time, then the system loader."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("ZEN_LIBRARY")
    if env:
        if os.path.isdir(env):
            for s in _SONAMES:
                yield "ZEN_LIBRARY", os.path.join(env, s)
        else:
            yield "ZEN_LIBRARY", env
        return  # an explicit choice is never silently replaced by another library
    for s in _SONAMES:
        yield "next to the package", os.path.join(here, s)
    try:
        from . import _install  # written by `cmake --install` and the build tree: where libzen is
        libdir = os.path.normpath(os.path.join(here, _install.LIBDIR))
        for s in _SONAMES:
            yield "install prefix", os.path.join(libdir, s)
    except ImportError:
        pass
    for s in _SONAMES:
        yield "system loader", s
    found = ctypes.util.find_library("zen")
    if found:
        yield "system loader", found


def _load():
    tried = []
    for where, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{where}: {path} (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{where}: {path} ({e})")
    raise LibraryNotFoundError(
        "zen: cannot load libzen (the C library of zen). Searched:\n  " + "\n  ".join(tried) +
        "\nBuild it (cmake --preset cpu && cmake --build build) and set ZEN_LIBRARY to build/lib/libzen.so, "
        "or use PYTHONPATH=build/python (the build tree), or install it (cmake --install build --prefix P).")


# ---------------------------------------------------------------------------------------------
# Structs (mirrors of zen.h; the library checks `size`, see Options.initialized()).

c_size_t, c_int, c_uint32, c_uint64, c_double, c_char_p, c_void_p = (
    ctypes.c_size_t, ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_double, ctypes.c_char_p,
    ctypes.c_void_p)


class Options(ctypes.Structure):
    """zenOptions_t, field for field."""
    _fields_ = [
        ("size", c_size_t), ("pull", c_int), ("reject_duplicates", c_int), ("seed", c_uint64),
        ("threads", c_int), ("hash_functions", c_int), ("parallel_factor", c_double),
        ("serial_fraction", c_double), ("validate", c_int), ("sparcml_dense_switch", c_double),
        ("block_size", c_uint32), ("average", c_int), ("accumulate", c_int), ("node_size", c_int),
        ("inter_scheme", c_char_p), ("intra", c_void_p), ("inter", c_void_p), ("auto_candidates", c_char_p),
        ("auto_reevaluate_every", c_int), ("auto_drift", c_double), ("auto_explore_within", c_double),
        ("auto_max_explore", c_int), ("auto_trials", c_int), ("auto_sample_rows", c_uint64),
        ("auto_alpha_s", c_double), ("auto_message_s", c_double), ("auto_bytes_per_s", c_double),
        ("auto_entry_s", c_double), ("device_max_nnz", c_uint64), ("device_recv_capacity", c_uint64),
        ("device_pull_rows", c_uint64), ("push", c_int), ("auto_explore_budget", c_double),
        ("auto_explore_share", c_double), ("auto_cold_calls", c_double), ("auto_cores", c_int),
        ("auto_learn_link", c_double), ("auto_cache", c_char_p),
    ]


class Report(ctypes.Structure):
    """zenReport_t, field for field."""
    _fields_ = [
        ("size", c_size_t), ("sent", c_uint64), ("recv", c_uint64), ("seconds", c_double),
        ("push_imbalance", c_double), ("pull_imbalance", c_double), ("result_nnz", c_uint64),
        ("bound_bytes", c_double), ("serial_overflows", c_uint64), ("global_rows", c_uint64),
        ("phases", c_int), ("scheme", c_char_p), ("decision", c_char_p), ("encoding", c_char_p),
        ("push_encoding", c_char_p),
    ]


# ---------------------------------------------------------------------------------------------
# Declarations.

R = c_int          # zenResult_t
H = c_void_p       # zenComm_t, zenSparseAllreduce_t, zenRequest_t
PH = ctypes.POINTER(c_void_p)
PSZ = ctypes.POINTER(c_size_t)
PU64 = ctypes.POINTER(c_uint64)
PD = ctypes.POINTER(c_double)
PI = ctypes.POINTER(c_int)
PCS = ctypes.POINTER(c_char_p)

_DECLS = {
    "zenGetErrorString": (c_char_p, [c_int]),
    "zenGetLastError": (c_char_p, []),
    "zenGetVersion": (None, [PI, PI]),
    "zenGetVersionString": (c_char_p, []),
    "zenOptionsInit": (R, [c_void_p]),
    "zenCommInitLoopback": (R, [PH, c_int]),
    "zenCommInitMpi": (R, [PH, c_void_p]),
    "zenCommDestroy": (R, [H]),
    "zenCommRank": (R, [H, PI]),
    "zenCommSize": (R, [H, PI]),
    "zenCommSetTimeout": (R, [H, c_int]),
    "zenCommTraffic": (R, [H, PU64, PU64]),
    "zenSparseAllreduceCreate": (R, [PH, H, c_char_p, c_uint64, c_uint32, c_int, ctypes.POINTER(Options)]),
    "zenSparseAllreduceDense": (R, [H, c_size_t, c_void_p, c_int, c_void_p, c_void_p]),
    "zenSparseAllreduceSparse": (R, [H, c_size_t, c_void_p, c_int, c_void_p, PSZ]),
    "zenSparseAllreduceResult": (R, [H, c_void_p, c_void_p]),
    "zenSparseAllreduceResultSize": (R, [H, PSZ]),
    "zenSparseAllreduceDenseStart": (R, [H, c_size_t, c_void_p, c_int, c_void_p, c_void_p, PH]),
    "zenSparseAllreduceSparseStart": (R, [H, c_size_t, c_void_p, c_int, c_void_p, PH]),
    "zenRequestWait": (R, [PH]),
    "zenRequestTest": (R, [PH, PI]),
    "zenSparseAllreduceLastStats": (R, [H, PU64, PU64, PD]),
    "zenSparseAllreduceLastScheme": (R, [H, PCS, PCS]),
    "zenSparseAllreduceDestroy": (R, [H]),
    # Added after 0.1.0 (zen.h: "Reports and communicator collectives").
    "zenSparseAllreduceLastReport": (R, [H, ctypes.POINTER(Report)]),
    "zenSparseAllreduceLastPhase": (R, [H, c_int, PCS, PU64, PU64, PD]),
    "zenCommAllreduce": (R, [H, c_void_p, c_size_t, c_int, c_int]),
    "zenCommBroadcast": (R, [H, c_void_p, c_size_t, c_int]),
    "zenCommAllgather": (R, [H, c_void_p, c_size_t, c_void_p]),
    "zenCommAlltoallv": (R, [H, c_void_p, PSZ, PSZ, c_void_p, PSZ, PSZ]),
    "zenCommBarrier": (R, [H]),
    "zenCommSend": (R, [H, c_void_p, c_size_t, c_int, c_int]),
    "zenCommRecv": (R, [H, c_void_p, c_size_t, c_int, c_int]),
    "zenCommAbort": (R, [H, c_char_p]),
    "zenCommFailed": (R, [H, PI]),
}

# Enum values of zen.h.
DTYPES = {"f32": 0, "f64": 1, "f16": 2, "bf16": 3}
DTYPE_SIZE = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2}
INDEX_TYPES = {"int32": 0, "int64": 1}
ENCODINGS = {"auto": 0, "coo": 1, "bitmap": 2, "ef": 3, "elias_fano": 3}
REDUCE_OPS = {"sum": 0, "max": 1, "min": 2}


class _Lib:
    """The loaded library with its functions declared; calls raise zen.Error subclasses."""

    def __init__(self):
        self.dll, self.path = _load()
        missing = []
        for name, (restype, argtypes) in _DECLS.items():
            try:
                f = getattr(self.dll, name)
            except AttributeError:
                missing.append(name)
                continue
            f.restype = restype
            f.argtypes = argtypes
        if missing:
            raise LibraryNotFoundError(
                f"zen: {self.path} lacks {', '.join(missing)}: it is older than this Python package "
                "(rebuild zen, or point ZEN_LIBRARY at a newer libzen.so)")
        self.version = self.dll.zenGetVersionString().decode()
        probe = ctypes.create_string_buffer(4096)  # room for any future zenOptions_t
        self.dll.zenOptionsInit(probe)
        self.options_size = ctypes.c_size_t.from_buffer(probe).value

    def __getattr__(self, name):
        return getattr(self.dll, name)

    def check(self, rc, call):
        """Raise the zen.Error subclass of result `rc` with the thread's last message."""
        if rc != 0:
            msg = self.dll.zenGetLastError().decode(errors="replace")
            raise ERRORS.get(rc, Error)(msg, call=call, code=rc)

    def call(self, name, *args):
        """Call `name` (GIL released by ctypes for the duration) and raise on failure."""
        self.check(getattr(self.dll, name)(*args), name)


_lib = None
_lib_lock = threading.Lock()


def lib():
    """The process's libzen (loaded at first use)."""
    global _lib
    if _lib is None:
        with _lib_lock:
            if _lib is None:
                _lib = _Lib()
    return _lib
