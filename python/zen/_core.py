"""zen's Python API over the C API: communicators (an mpi4py communicator or loopback threads), the
sparse allreduce plan (SparseAllreduce, mirroring zenOptions_t), non-blocking requests and reports.

Arrays: NumPy arrays and CPU torch tensors are passed to C by address, without copies, when they are
contiguous (the buffer protocol / ``data_ptr``); anything else NumPy can view (``array.array``,
lists) is converted first. Outputs are of the inputs' kind: torch tensors in, torch tensors out.
"""
import atexit
import ctypes
import itertools
import os
import threading
import weakref

import numpy as np

from . import _capi
from ._capi import InvalidArgumentError, InvalidUsageError, UnsupportedError, lib

# ---------------------------------------------------------------------------------------------
# dtypes and arrays

_DTYPE_ALIASES = {
    "f32": "f32", "float32": "f32", "float": "f32", "fp32": "f32",
    "f64": "f64", "float64": "f64", "double": "f64", "fp64": "f64",
    "f16": "f16", "float16": "f16", "half": "f16", "fp16": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
}
_NP_OF = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16}  # bf16: raw bits


def dtype_name(dtype):
    """zen's dtype name ("f32", "f64", "f16", "bf16") of a string, NumPy or torch dtype."""
    if isinstance(dtype, str):
        key = dtype.lower()
    else:
        key = str(dtype).replace("torch.", "").lower()
        if key.startswith("<class"):
            key = np.dtype(dtype).name
    if key not in _DTYPE_ALIASES:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            pass
    if key not in _DTYPE_ALIASES:
        raise InvalidArgumentError(f"dtype {dtype!r} is not one of f32, f64, f16, bf16", call="zen")
    return _DTYPE_ALIASES[key]


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "data_ptr")


class _Arr:
    """A contiguous CPU array as C sees it: address, element count, element kind and size."""
    __slots__ = ("obj", "ptr", "count", "kind", "itemsize", "torch", "shape")

    def __init__(self, x, what, writable=False):
        if _is_torch(x):
            if x.device.type != "cpu":
                raise UnsupportedError(f"{what} is a {x.device.type} tensor; this zen build takes CPU tensors",
                                       call="zen")
            if x.layout != __import__("torch").strided:
                raise InvalidArgumentError(f"{what} has layout {x.layout}; pass dense (strided) tensors", call="zen")
            if not x.is_contiguous():
                if writable:
                    raise InvalidArgumentError(f"{what} must be contiguous (it is written in place)", call="zen")
                x = x.contiguous()
            self.torch = True
            self.kind = str(x.dtype).replace("torch.", "")
            self.itemsize = x.element_size()
            self.count = x.numel()
            self.ptr = x.data_ptr() if self.count else None
            self.shape = tuple(x.shape)
        else:
            if not isinstance(x, np.ndarray):
                if writable:
                    raise InvalidArgumentError(f"{what} must be a NumPy array or a torch tensor", call="zen")
                x = np.asarray(x)
            if not x.flags.c_contiguous:
                if writable:
                    raise InvalidArgumentError(f"{what} must be C-contiguous (it is written in place)", call="zen")
                x = np.ascontiguousarray(x)
            if writable and not x.flags.writeable:
                raise InvalidArgumentError(f"{what} is read-only", call="zen")
            self.torch = False
            self.kind = x.dtype.name
            self.itemsize = x.dtype.itemsize
            self.count = x.size
            self.ptr = x.ctypes.data if self.count else None
            self.shape = x.shape
        self.obj = x


def _value_kind_ok(arr, dtype):
    """Whether the array's element type is the plan dtype (NumPy bf16: uint16 raw bits)."""
    want = {"f32": ("float32",), "f64": ("float64",), "f16": ("float16",), "bf16": ("bfloat16", "uint16")}[dtype]
    return arr.kind in want and arr.itemsize == _capi.DTYPE_SIZE[dtype]


def _empty(like_torch, count, dtype):
    if like_torch:
        import torch
        return torch.empty(count, dtype={"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
                                         "bf16": torch.bfloat16, "int64": torch.int64}[dtype])
    return np.empty(count, dtype=np.int64 if dtype == "int64" else _NP_OF[dtype])


def _ptr(x):
    return x.data_ptr() if _is_torch(x) else x.ctypes.data


# ---------------------------------------------------------------------------------------------
# Lifetime: everything still open is closed before MPI finalizes at interpreter exit (mpi4py
# finalizes MPI after Python's atexit handlers have run).

_live = weakref.WeakSet()
_live_lock = threading.Lock()
_created = itertools.count()  # creation order of plans and communicators in this process


@atexit.register
def _close_all():
    """Plans first, then communicators, newest first: the same order on every rank (they were
    created collectively in the same order), so each communicator's closing handshake (MPI) finds
    its peers closing the same one instead of waiting out the handshake's bound for each."""
    for obj in sorted(list(_live), key=lambda o: (o._close_order, -o._seq)):
        try:
            obj.close()
        except Exception:  # noqa: BLE001 - exit path: nothing useful to raise to
            pass


# ---------------------------------------------------------------------------------------------
# Communicator


class _Closable:
    """``with`` support and a finalizer for an object owning a zen handle: leaving the block or
    collecting the object calls ``close()`` (idempotent); a finalizer never raises."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - finalizer
            pass


class Communicator(_Closable):
    """A zen communicator: ``Communicator.from_mpi(comm)`` (any mpi4py communicator) or
    ``Communicator.loopback(n)`` (n ranks as threads of this process, for tests).

    The dense collectives (allreduce, broadcast, allgather, alltoallv, barrier, send, recv) run
    with the communicator's timeout and poisoning rule: an error on one rank reaches every rank's
    call as an exception (RemoteError naming that rank) and the communicator refuses further use.
    """
    _close_order = 1

    def __init__(self, handle, keep=None):
        self._h = ctypes.c_void_p(handle)
        self._keep = keep
        self._plans = weakref.WeakSet()
        self._seq = next(_created)
        with _live_lock:
            _live.add(self)
        r, n = ctypes.c_int(), ctypes.c_int()
        lib().call("zenCommRank", self._h, ctypes.byref(r))
        lib().call("zenCommSize", self._h, ctypes.byref(n))
        self.rank, self.size = r.value, n.value

    @classmethod
    def from_mpi(cls, comm=None, timeout=None):
        """Wrap an mpi4py communicator (default COMM_WORLD); zen duplicates it. Collective over
        `comm`. `timeout` in seconds (default: zen's, 300 s)."""
        from mpi4py import MPI  # initializes MPI (MPI_THREAD_MULTIPLE by default) if needed
        if comm is None:
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise InvalidArgumentError(f"from_mpi takes an mpi4py communicator, not {comm!r}", call="zenCommInitMpi")
        h = ctypes.c_void_p()
        lib().call("zenCommInitMpi", ctypes.byref(h), ctypes.c_void_p(MPI._addressof(comm)))
        c = cls(h.value)
        if timeout is not None:
            c.set_timeout(timeout)
        return c

    @classmethod
    def loopback(cls, n, timeout=None):
        """n communicators of one in-process world; element i is rank i (drive each from its own thread)."""
        hs = (ctypes.c_void_p * n)()
        lib().call("zenCommInitLoopback", hs, int(n))
        comms = [cls(h) for h in hs]
        if timeout is not None:
            for c in comms:
                c.set_timeout(timeout)
        return comms

    # -- state ---------------------------------------------------------------------------------

    @property
    def handle(self):
        if not self._h:
            raise InvalidUsageError("the communicator was closed", call="zen.Communicator")
        return self._h

    def set_timeout(self, seconds):
        """Every later operation fails with zen.TimeoutError (naming the missing rank) after this long."""
        lib().call("zenCommSetTimeout", self.handle, max(1, int(round(seconds * 1000))))

    def traffic(self):
        """(bytes sent, bytes received) by this rank since creation."""
        s, r = ctypes.c_uint64(), ctypes.c_uint64()
        lib().call("zenCommTraffic", self.handle, ctypes.byref(s), ctypes.byref(r))
        return s.value, r.value

    @property
    def failed(self):
        """True once the communicator refuses further use (an error seen on this rank)."""
        f = ctypes.c_int()
        lib().call("zenCommFailed", self.handle, ctypes.byref(f))
        return bool(f.value)

    def abort(self, reason):
        """Poison the communicator on purpose: every peer's pending and later calls raise
        RemoteError quoting `reason`; this rank's later calls raise InvalidUsageError."""
        lib().call("zenCommAbort", self.handle, str(reason).encode())

    def fail(self, exc):
        """Poison the communicator with `exc`'s message (so every rank learns of it at once) and
        return `exc` for the caller to raise."""
        try:
            if self._h:
                self.abort(str(exc) if isinstance(exc, _capi.Error) else f"{type(exc).__name__}: {exc}")
        except _capi.Error:
            pass
        return exc

    def close(self):
        """Destroy the plans made on this communicator, then the communicator (idempotent)."""
        if not self._h:
            return
        for p in list(self._plans):
            p.close()
        h, self._h = self._h, ctypes.c_void_p()
        with _live_lock:
            _live.discard(self)
        lib().call("zenCommDestroy", h)

    def __repr__(self):
        return f"<zen.Communicator rank {self.rank} of {self.size}{'' if self._h else ', closed'}>"

    # -- dense collectives (in place; NumPy arrays or CPU tensors) -----------------------------

    def allreduce(self, buf, op="sum"):
        """In place: `buf` (f32/f64/f16/bf16) reduced over all ranks with op "sum", "max" or "min"
        by the backend's native allreduce. Returns buf."""
        a = _Arr(buf, "allreduce buffer", writable=True)
        kinds = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}
        if a.kind not in kinds:
            raise self.fail(InvalidArgumentError(
                f"rank {self.rank}: allreduce of {a.kind} is not supported (f32, f64, f16, bf16)", call="zenCommAllreduce"))
        if op not in _capi.REDUCE_OPS:
            raise self.fail(InvalidArgumentError(f"rank {self.rank}: reduce op {op!r} is not sum, max or min",
                                                 call="zenCommAllreduce"))
        lib().call("zenCommAllreduce", self.handle, a.ptr, a.count, _capi.DTYPES[kinds[a.kind]], _capi.REDUCE_OPS[op])
        return buf

    def broadcast(self, buf, root=0):
        """In place: rank `root`'s bytes of `buf` to every rank. Returns buf."""
        a = _Arr(buf, "broadcast buffer", writable=True)
        lib().call("zenCommBroadcast", self.handle, a.ptr, a.count * a.itemsize, int(root))
        return buf

    def allgather(self, send, recv=None):
        """Every rank's `send`; `recv` (size x send's elements, rank-major) is allocated if None."""
        s = _Arr(send, "allgather input")
        if recv is None:
            recv = np.empty((self.size,) + tuple(s.shape), dtype=s.obj.dtype) if not s.torch else \
                s.obj.new_empty((self.size,) + tuple(s.shape))
        r = _Arr(recv, "allgather output", writable=True)
        if r.count * r.itemsize != self.size * s.count * s.itemsize:
            raise self.fail(InvalidArgumentError(
                f"rank {self.rank}: allgather output holds {r.count * r.itemsize} bytes, needs "
                f"{self.size} x {s.count * s.itemsize}", call="zenCommAllgather"))
        lib().call("zenCommAllgather", self.handle, s.ptr, s.count * s.itemsize, r.ptr)
        return recv

    def alltoallv(self, send, send_bytes, recv, recv_bytes, send_displs=None, recv_displs=None):
        """Bytes send_bytes[p] of `send` (at send_displs[p], default packed) go to rank p, which
        receives them at recv_displs[rank] of `recv`. Sizes in bytes, one per rank."""
        s = _Arr(send, "alltoallv input")
        r = _Arr(recv, "alltoallv output", writable=True)
        n = self.size
        arr = ctypes.c_size_t * n

        def packed(sizes):
            out, o = [], 0
            for b in sizes:
                out.append(o)
                o += int(b)
            return out
        sb, rb = list(map(int, send_bytes)), list(map(int, recv_bytes))
        sd = packed(sb) if send_displs is None else list(map(int, send_displs))
        rd = packed(rb) if recv_displs is None else list(map(int, recv_displs))
        if not (len(sb) == len(rb) == len(sd) == len(rd) == n):
            raise self.fail(InvalidArgumentError(f"rank {self.rank}: alltoallv needs {n} sizes per list",
                                                 call="zenCommAlltoallv"))
        if any(d + b > s.count * s.itemsize for d, b in zip(sd, sb)) or \
                any(d + b > r.count * r.itemsize for d, b in zip(rd, rb)):
            raise self.fail(InvalidArgumentError(f"rank {self.rank}: alltoallv block outside its buffer",
                                                 call="zenCommAlltoallv"))
        lib().call("zenCommAlltoallv", self.handle, s.ptr, arr(*sb), arr(*sd), r.ptr, arr(*rb), arr(*rd))
        return recv

    def barrier(self):
        lib().call("zenCommBarrier", self.handle)

    def send(self, buf, peer, tag=0):
        """Buffered send of `buf`'s bytes to `peer` (tag in [0, 16383])."""
        a = _Arr(buf, "send buffer")
        lib().call("zenCommSend", self.handle, a.ptr, a.count * a.itemsize, int(peer), int(tag))

    def recv(self, buf, peer, tag=0):
        """Receive exactly `buf`'s size in bytes from `peer` into `buf`. Returns buf."""
        a = _Arr(buf, "receive buffer", writable=True)
        lib().call("zenCommRecv", self.handle, a.ptr, a.count * a.itemsize, int(peer), int(tag))
        return buf


# ---------------------------------------------------------------------------------------------
# Reports


class Phase:
    """One phase of a call on this rank: name, bytes sent and received, seconds."""
    __slots__ = ("name", "sent", "recv", "seconds")

    def __init__(self, name, sent, recv, seconds):
        self.name, self.sent, self.recv, self.seconds = name, sent, recv, seconds

    def __repr__(self):
        return f"Phase({self.name!r}, sent={self.sent}, recv={self.recv}, seconds={self.seconds:.6f})"


class Report:
    """The last call of a plan on this rank (zen::SyncReport): ``scheme`` that ran and, for
    "auto", the ``decision`` (what it chose and why); ``phases`` with bytes and seconds;
    totals ``sent``/``recv``/``seconds``; ``bound_bytes`` and ``bound_eff`` = sent / bound_bytes
    (balanced, sparse_ps; None otherwise); imbalances, ``result_nnz``, encodings."""

    def __init__(self, r, phases):
        for f, _ in _capi.Report._fields_:
            if f in ("size", "phases"):
                continue
            v = getattr(r, f)
            setattr(self, f, v.decode() if isinstance(v, bytes) else ("" if v is None and f in (
                "scheme", "decision", "encoding", "push_encoding") else v))
        self.phases = phases
        self.bound_eff = self.sent / self.bound_bytes if self.bound_bytes > 0 else None

    def as_dict(self):
        d = {k: v for k, v in vars(self).items() if k != "phases"}
        d["phases"] = [{"name": p.name, "sent": p.sent, "recv": p.recv, "seconds": p.seconds} for p in self.phases]
        return d

    def __repr__(self):
        eff = f", bound_eff={self.bound_eff:.3f}" if self.bound_eff else ""
        dec = f", decision={self.decision!r}" if self.decision else ""
        return (f"Report(scheme={self.scheme!r}{dec}, sent={self.sent}, recv={self.recv}, "
                f"seconds={self.seconds:.6f}{eff}, phases={self.phases})")


# ---------------------------------------------------------------------------------------------
# SparseAllreduce


_OPTION_FIELDS = {f for f, _ in _capi.Options._fields_} - {"size"}


class Request:
    """A non-blocking call (SparseAllreduce.start): ``wait()`` returns its result, ``test()``
    returns True once it has completed (then ``result`` holds it). The inputs stay referenced
    (and must stay untouched) until completion."""

    def __init__(self, plan, handle, keep, finish):
        self._plan, self._h, self._keep, self._finish = plan, handle, keep, finish
        self.result = None
        self.done = False

    def _complete(self, rc):
        self.done = True
        self._keep = None
        self._plan._pending -= 1
        lib().check(rc, "zenRequestWait")
        self.result = self._finish()
        return self.result

    def wait(self):
        """Block (without the GIL) until the call completed; its result, or its error raised."""
        if self.done:
            return self.result
        return self._complete(lib().zenRequestWait(ctypes.byref(self._h)))

    def test(self):
        """True once completed (errors are raised here); False while the call runs."""
        if self.done:
            return True
        d = ctypes.c_int()
        rc = lib().zenRequestTest(ctypes.byref(self._h), ctypes.byref(d))
        if not d.value:
            return False
        self._complete(rc)
        return True

    def __del__(self):
        if not self.done and self._h:
            try:
                lib().zenRequestWait(ctypes.byref(self._h))  # its error, if any, poisoned the communicator
                self._plan._pending -= 1
            except Exception:  # noqa: BLE001 - finalizer
                pass


class SparseAllreduce(_Closable):
    """A plan: set up once (collectively) for sparse tensors of dense length `size` elements,
    `row_width` elements per index and `dtype`, reused for every call.

    ``scheme``: "balanced", "dense", "dense_native", "allgather", "sparcml", "omnireduce",
    "sparse_ps", "auto" (cost model plus measured candidates), "hierarchical" or "hier_<scheme>".
    ``options`` are the fields of zenOptions_t (docs/api.md), e.g. ``average=True``,
    ``accumulate=True``, ``pull="ef"``, ``push="coo"``, ``reject_duplicates=True``, ``threads=2``,
    ``node_size=2``, ``intra=comm_a, inter=comm_b``, ``auto_candidates=["balanced", "allgather"]``.

    Calls take ``indices`` (int32 or int64, any order, duplicates summed) and ``values``
    (nnz x row_width of the plan dtype), as NumPy arrays or CPU tensors.
    """
    _close_order = 0

    def __init__(self, comm, size, row_width=1, dtype="f32", scheme="auto", **options):
        self.comm = comm
        self.size, self.row_width, self.scheme = int(size), int(row_width), str(scheme)
        self._h = ctypes.c_void_p()
        self._pending = 0
        self._keep = []
        try:
            self.dtype = dtype_name(dtype)
            opts = self._options(options)
        except _capi.Error as e:
            raise comm.fail(e) from None
        lib().call("zenSparseAllreduceCreate", ctypes.byref(self._h), comm.handle, self.scheme.encode(),
                   self.size, self.row_width, _capi.DTYPES[self.dtype], ctypes.byref(opts))
        self.average = bool(opts.average)
        self.accumulate = bool(opts.accumulate)
        self._seq = next(_created)
        comm._plans.add(self)
        with _live_lock:
            _live.add(self)

    def _options(self, options):
        o = _capi.Options()
        have = lib().options_size  # sizeof(zenOptions_t) of the loaded library
        if have > ctypes.sizeof(o):
            # A newer library (larger struct): its defaults for the fields this package knows.
            buf = ctypes.create_string_buffer(have)
            lib().call("zenOptionsInit", buf)
            ctypes.memmove(ctypes.byref(o), buf, ctypes.sizeof(o))
        else:
            lib().call("zenOptionsInit", ctypes.byref(o))
        o.size = min(ctypes.sizeof(o), have)
        for k, v in options.items():
            if k not in _OPTION_FIELDS:
                raise InvalidArgumentError(f"unknown option {k!r}; options are the fields of zenOptions_t: "
                                           f"{', '.join(sorted(_OPTION_FIELDS))}", call="zenSparseAllreduceCreate")
            field = getattr(_capi.Options, k)
            if field.offset + field.size > o.size:
                raise UnsupportedError(f"option {k!r} is newer than the loaded libzen ({lib().path}, "
                                       f"zenOptions_t of {have} bytes)", call="zenSparseAllreduceCreate")
            if k in ("pull", "push"):
                if isinstance(v, str):
                    if v.lower() not in _capi.ENCODINGS:
                        raise InvalidArgumentError(f"{k} encoding {v!r} is not auto, coo, bitmap or ef",
                                                   call="zenSparseAllreduceCreate")
                    v = _capi.ENCODINGS[v.lower()]
            elif k in ("intra", "inter"):
                self._keep.append(v)
                v = v.handle if v is not None else None
            elif k in ("inter_scheme", "auto_candidates"):
                if v is not None:
                    v = (",".join(v) if not isinstance(v, str) else v).encode()
                    self._keep.append(v)
            elif k == "auto_cache":  # a path (str, bytes or os.PathLike); None: no cache
                if v is not None:
                    v = os.fsencode(v)
                    self._keep.append(v)
            elif isinstance(v, bool):
                v = int(v)
            setattr(o, k, v)
        return o

    # -- inputs --------------------------------------------------------------------------------

    def _inputs(self, indices, values, call):
        try:
            i = _Arr(indices, "indices")
            v = _Arr(values, "values")
            if i.kind not in ("int32", "int64"):
                raise InvalidArgumentError(f"rank {self.comm.rank}: indices are {i.kind}, not int32 or int64", call=call)
            if not _value_kind_ok(v, self.dtype):
                raise InvalidArgumentError(f"rank {self.comm.rank}: values are {v.kind} but the plan's dtype is "
                                           f"{self.dtype}", call=call)
            if v.count != i.count * self.row_width:
                raise InvalidArgumentError(f"rank {self.comm.rank}: {i.count} indices need {i.count * self.row_width} "
                                           f"values (row width {self.row_width}), got {v.count}", call=call)
        except _capi.Error as e:
            raise self.comm.fail(e) from None
        except Exception as e:  # noqa: BLE001 - anything unreadable is an argument error, told to every rank
            raise self.comm.fail(InvalidArgumentError(f"rank {self.comm.rank}: {type(e).__name__}: {e}", call=call)) \
                from e
        return i, v

    def _out(self, out, like, call):
        if out is None:
            if self.accumulate:
                raise self.comm.fail(InvalidUsageError(
                    f"rank {self.comm.rank}: an accumulating plan adds into `out`: pass it", call=call))
            return _empty(like.torch, self.size, self.dtype)
        o = _Arr(out, "out", writable=True)
        if not _value_kind_ok(o, self.dtype) or o.count != self.size:
            raise self.comm.fail(InvalidArgumentError(
                f"rank {self.comm.rank}: out must hold {self.size} values of {self.dtype}, "
                f"got {o.count} of {o.kind}", call=call))
        return out

    def _result(self, like):
        k = ctypes.c_size_t()
        lib().call("zenSparseAllreduceResultSize", self.handle, ctypes.byref(k))
        k = k.value
        idx = _empty(like.torch, k, "int64")
        val = _empty(like.torch, k * self.row_width, self.dtype)
        if k:
            lib().call("zenSparseAllreduceResult", self.handle, _ptr(idx), _ptr(val))
        if len(like.shape) > 1:
            val = val.reshape((k,) + tuple(like.shape[1:]))
        return idx, val

    @property
    def handle(self):
        if not self._h:
            raise InvalidUsageError("the plan was closed", call="zen.SparseAllreduce")
        return self._h

    # -- calls ---------------------------------------------------------------------------------

    def sparse(self, indices, values):
        """Sum over ranks; returns (indices ascending int64, values) of the union of the supports."""
        i, v = self._inputs(indices, values, "zenSparseAllreduceSparse")
        k = ctypes.c_size_t()
        lib().call("zenSparseAllreduceSparse", self.handle, i.count, i.ptr, _capi.INDEX_TYPES[i.kind], v.ptr,
                   ctypes.byref(k))
        return self._result(v)

    def dense(self, indices, values, out=None):
        """Sum over ranks into a dense array of `size` values (`out`, or a new one); returns it.
        With accumulate=True the result is added into `out` (required)."""
        i, v = self._inputs(indices, values, "zenSparseAllreduceDense")
        out = self._out(out, v, "zenSparseAllreduceDense")
        lib().call("zenSparseAllreduceDense", self.handle, i.count, i.ptr, _capi.INDEX_TYPES[i.kind], v.ptr,
                   _ptr(out) if self.size else None)
        return out

    def start(self, indices, values, out=None, dense=False):
        """Non-blocking: queue the call on the communicator's call-queue thread and return a Request
        whose wait() gives what sparse() (or, with dense=True or `out`, dense()) would return."""
        if dense or out is not None:
            i, v = self._inputs(indices, values, "zenSparseAllreduceDenseStart")
            out = self._out(out, v, "zenSparseAllreduceDenseStart")
            q = ctypes.c_void_p()
            lib().call("zenSparseAllreduceDenseStart", self.handle, i.count, i.ptr, _capi.INDEX_TYPES[i.kind], v.ptr,
                       _ptr(out) if self.size else None, ctypes.byref(q))
            finish = (lambda o=out: o)
        else:
            i, v = self._inputs(indices, values, "zenSparseAllreduceSparseStart")
            q = ctypes.c_void_p()
            lib().call("zenSparseAllreduceSparseStart", self.handle, i.count, i.ptr, _capi.INDEX_TYPES[i.kind], v.ptr,
                       ctypes.byref(q))
            finish = (lambda like=v: self._result(like))
        self._pending += 1
        return Request(self, q, (i, v, out), finish)

    # -- report and lifetime -------------------------------------------------------------------

    def report(self):
        """The Report of the last completed call on this rank."""
        if self._pending:
            raise InvalidUsageError("report() while a request of this plan is pending: wait for it first",
                                    call="zenSparseAllreduceLastReport")
        r = _capi.Report()
        r.size = ctypes.sizeof(r)
        lib().call("zenSparseAllreduceLastReport", self.handle, ctypes.byref(r))
        phases = []
        for p in range(r.phases):
            nm, s, rv, sec = ctypes.c_char_p(), ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_double()
            lib().call("zenSparseAllreduceLastPhase", self.handle, p, ctypes.byref(nm), ctypes.byref(s),
                       ctypes.byref(rv), ctypes.byref(sec))
            phases.append(Phase(nm.value.decode(), s.value, rv.value, sec.value))
        return Report(r, phases)

    def close(self):
        """Destroy the plan (waits for its pending non-blocking calls first); idempotent."""
        if not self._h:
            return
        h, self._h = self._h, ctypes.c_void_p()
        with _live_lock:
            _live.discard(self)
        self.comm._plans.discard(self)
        lib().call("zenSparseAllreduceDestroy", h)

    def __repr__(self):
        return (f"<zen.SparseAllreduce {self.scheme} size={self.size} row_width={self.row_width} "
                f"dtype={self.dtype} on {self.comm!r}>")
