"""zen as a torch.distributed backend: ``import zen.torch`` registers backend "zen" (and the
rendezvous ``mpi://``), so a DDP script written for Gloo runs on zen by changing the backend name::

    mpirun -np 4 python3 train.py
    import zen.torch
    dist.init_process_group("zen", init_method="mpi://")      # or any init_method Gloo accepts

Sparse COO tensors (``nn.Embedding(sparse=True)`` / ``EmbeddingBag`` gradients, coalesced or as
backward emits them, hybrid tensors, empty ones) are summed by a zen plan cached per (shape, dtype,
scheme, op); dense tensors by the MPI backend's native allreduce; broadcast, allgather, barrier,
reduce_scatter, send/recv, reduce, gather, scatter and all_to_all by zen's communicator collectives.
Every collective first agrees on what it is (op, dtype, shape) with one small allgather, so a rank
that passes something else raises the same InvalidUsageError on every rank instead of hanging or
mixing data; every error poisons the group on every rank (zen's rule: recreate it).

Written for torch 1.13 (Debian 12); the torch 2.x differences are confined to the "torch version
differences" section below and are untested here (docs/python.md).
"""
import datetime
import functools
import inspect
import math
import os
import socket
import threading
import time

import numpy as np
import torch
import torch.distributed as dist

from . import _capi
from ._capi import InvalidArgumentError, InvalidUsageError, UnsupportedError
from ._core import Communicator, SparseAllreduce, dtype_name

BACKEND = "zen"

# ---------------------------------------------------------------------------------------------
# torch version differences (the only place that knows them; torch >= 2 paths are untested here)

TORCH_MAJOR = int(torch.__version__.split(".")[0])


def _completed_work(value):
    """A finished Work whose future holds `value` (a Python Work subclass makes DDP hang in 1.13)."""
    fut = torch.futures.Future()
    fut.set_result(value)
    return torch._C._distributed_c10d._create_work_from_future(fut)


def _coalesced_sparse(indices, values, size):
    """A sparse COO tensor marked coalesced, without validation (zen's result is sorted and unique)."""
    if TORCH_MAJOR >= 2:
        return torch.sparse_coo_tensor(indices, values, size, is_coalesced=True, check_invariants=False)
    return torch._sparse_coo_tensor_unsafe(indices, values, size)._coalesced_(True)


def _register_backend(name, creator):
    if hasattr(dist.Backend, name.upper()):  # registered already (register_backend sets the attribute)
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:  # torch >= 2.1: backends declare their devices
        dist.Backend.register_backend(name, creator, extended_api=True, devices=["cpu"])
    else:
        dist.Backend.register_backend(name, creator, extended_api=True)


_OPS = {}
for _n in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
    if hasattr(dist.ReduceOp, _n):
        _OPS[_n] = getattr(dist.ReduceOp, _n)
_OP_CODE = {n: i for i, n in enumerate(_OPS)}


def _op_name(op):
    for n, v in _OPS.items():
        if op == v:
            return n
    return str(op)


# ---------------------------------------------------------------------------------------------
# Options


class Options:
    """Per process group options: ``init_process_group("zen", pg_options=zen.torch.Options(...))``
    or ``dist.new_group(backend="zen", pg_options=...)``.

    scheme: zen scheme of sparse allreduces (default: env ``ZEN_SCHEME``, else "auto");
    comm: the mpi4py communicator the group's ranks are taken from (default COMM_WORLD);
    check_dense: agree on op/shape/dtype before dense collectives too (default True; sparse ones
    always check, their plan cache depends on it); plan_options: zenOptions_t fields for every
    sparse plan (e.g. threads=1, pull="ef")."""

    def __init__(self, scheme=None, comm=None, check_dense=True, **plan_options):
        self.scheme = scheme
        self.comm = comm
        self.check_dense = check_dense
        self.plan_options = plan_options


# ---------------------------------------------------------------------------------------------
# The process group


_TORCH_DTYPES = {  # code (for the agreement record) and zen dtype (floating point ones)
    torch.float32: (0, "f32"), torch.float64: (1, "f64"), torch.float16: (2, "f16"), torch.bfloat16: (3, "bf16"),
    torch.int8: (4, None), torch.uint8: (5, None), torch.int16: (6, None), torch.int32: (7, None),
    torch.int64: (8, None), torch.bool: (9, None), torch.complex64: (10, None), torch.complex128: (11, None),
}
_KINDS = ["allreduce", "allreduce_sparse", "broadcast", "allgather", "reduce_scatter", "reduce", "gather",
          "scatter", "alltoall", "barrier"]
_REC = 16  # int64 fields of an agreement record


class Stats:
    """Counters of one process group (this rank): calls and seconds per kind, plans created, and
    where a sparse allreduce spends its time: the agreement record (``agree_seconds``), zen's call
    (``zen_seconds``, plan creation included), the rest (indices, result tensors, the copy into the
    input: ``sparse_seconds`` minus both)."""

    def __init__(self):
        self.sparse_calls = self.dense_calls = self.other_calls = 0
        self.sparse_seconds = self.dense_seconds = self.other_seconds = 0.0
        self.agree_seconds = self.zen_seconds = 0.0
        self.plans_created = 0

    def as_dict(self):
        return dict(vars(self))


class ProcessGroupZen(dist.ProcessGroup):
    """torch.distributed process group over a zen communicator. Every collective runs to
    completion in the calling thread (zen's own threads parallelize its work) and returns a
    completed Work whose future holds the result tensors."""

    def __init__(self, rank, size, comm, options, mpi_comm=None):
        super().__init__(rank, size)
        self.comm = comm
        self._mpi_comm = mpi_comm  # a sub-communicator this group made (freed with it)
        self.options = options
        self.scheme = options.scheme or os.environ.get("ZEN_SCHEME") or "auto"
        self.plans = {}
        self.stats = Stats()
        self._lock = threading.RLock()
        self._rec = np.zeros(_REC, np.int64)
        self._all = np.zeros((size, _REC), np.int64)
        self._broken = None  # the error that ended the group (ranks that disagreed), raised again by every op

    def getBackendName(self):  # noqa: N802 - torch's name
        return BACKEND

    def name(self):
        return BACKEND

    def __repr__(self):
        return f"<zen.torch.ProcessGroupZen rank {self.rank()} of {self.size()}, scheme {self.scheme}>"

    # -- lifetime ------------------------------------------------------------------------------

    def shutdown(self):
        """Destroy the plans, the zen communicator and the MPI sub-communicator (idempotent)."""
        with self._lock:
            for p in self.plans.values():
                p.close()
            self.plans.clear()
            self.comm.close()
            if self._mpi_comm is not None:
                try:
                    self._mpi_comm.Free()
                except Exception:  # noqa: BLE001 - MPI may be finalized at exit
                    pass
                self._mpi_comm = None

    def __del__(self):
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - finalizer
            pass

    # -- helpers -------------------------------------------------------------------------------

    def _fail(self, exc):
        """Poison the group with `exc` (every rank learns of it at once) and return it."""
        return self.comm.fail(exc)

    def _agree(self, kind, t=None, op=0, root=0, extra=0):
        """One allgather of a 16-int64 record (kind, op, root, dtype, shape): raises the same
        InvalidUsageError on every rank when the ranks disagree."""
        r = self._rec
        r[:] = 0
        r[0], r[1], r[2], r[3] = _KINDS.index(kind), op, root, extra
        if t is not None:
            r[4] = _TORCH_DTYPES.get(t.dtype, (99,))[0]
            r[5] = 1 if t.is_sparse else 0
            shape = list(t.shape)
            r[6] = len(shape)
            for i, s in enumerate(shape[:8]):
                r[7 + i] = s
            r[15] = hash(tuple(shape[8:])) if len(shape) > 8 else 0
        self.comm.allgather(r, self._all)
        if (self._all == self._all[0]).all():
            return
        # Every rank holds the same table, so every rank finds the disagreement and raises the same
        # error by itself; the group is then closed on every rank without a message to the peers
        # (an abort could reach a peer whose allgather has not returned yet and replace its error).
        self._broken = InvalidUsageError(
            "zen process group: ranks disagree on a collective: " +
            "; ".join(f"rank {p}: {self._describe(self._all[p])}" for p in range(self.size())),
            call=f"zen.torch {kind}")
        raise self._broken

    @staticmethod
    def _describe(rec):
        kind = _KINDS[rec[0]] if 0 <= rec[0] < len(_KINDS) else "?"
        names = {v[0]: str(k).replace("torch.", "") for k, v in _TORCH_DTYPES.items()}
        s = f"{kind}"
        if rec[0] not in (_KINDS.index("barrier"),):
            shape = tuple(int(x) for x in rec[7:7 + min(int(rec[6]), 8)])
            s += f" {'sparse ' if rec[5] else ''}{names.get(int(rec[4]), '?')} {shape}"
        if rec[0] in (_KINDS.index("allreduce"), _KINDS.index("allreduce_sparse"), _KINDS.index("reduce"),
                      _KINDS.index("reduce_scatter")):
            s += f" op {list(_OPS)[rec[1]] if 0 <= rec[1] < len(_OPS) else rec[1]}"
        if rec[0] in (_KINDS.index("broadcast"), _KINDS.index("reduce"), _KINDS.index("gather"),
                      _KINDS.index("scatter")):
            s += f" root {rec[2]}"
        if rec[0] == _KINDS.index("allreduce_sparse"):
            s += " scheme " + int(rec[3]).to_bytes(7, "little").rstrip(b"\0").decode(errors="replace")
        elif rec[3]:
            s += f" ({rec[3]})"
        return s

    def _cpu(self, tensors, what):
        for t in tensors:
            if t.device.type != "cpu":
                raise self._fail(UnsupportedError(
                    f"rank {self.rank()}: {what} got a {t.device} tensor; this zen build takes CPU tensors "
                    "(the zen process group is CPU-only)", call=f"zen.torch {what}"))

    def _timed(self, kind, f):
        """Run one operation of the group: timed, serialized, and poisoning the group on every rank
        when anything fails here (a zen error from C has poisoned it already; any other exception,
        e.g. torch's, does it now), so no peer waits out its timeout."""
        t0 = time.perf_counter()
        try:
            with self._lock:
                if self._broken is not None:
                    raise InvalidUsageError(f"the group failed and refuses further use (first error: {self._broken})",
                                            call="zen.torch")
                return f()
        except BaseException as e:
            if not isinstance(e, _capi.Error):
                self.comm.fail(e)
            raise
        finally:
            dt = time.perf_counter() - t0
            st = self.stats
            if kind == "sparse":
                st.sparse_calls += 1
                st.sparse_seconds += dt
            elif kind == "dense":
                st.dense_calls += 1
                st.dense_seconds += dt
            else:
                st.other_calls += 1
                st.other_seconds += dt

    @staticmethod
    def _contig(t):
        return t if t.is_contiguous() else t.contiguous()

    def _gather_rows(self, t):
        """Every rank's copy of `t` (contiguous), stacked: shape (size, *t.shape)."""
        src = self._contig(t)
        out = torch.empty((self.size(),) + tuple(src.shape), dtype=src.dtype)
        self.comm.allgather(_bytes_view(src), _bytes_view(out))
        return out

    # -- allreduce -----------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else _OPS["SUM"]
        self._cpu(tensors, "allreduce")
        if all(t.is_sparse for t in tensors):
            return self._timed("sparse", lambda: _completed_work(
                [self._allreduce_sparse(t, _op_name(op), None) for t in tensors]))
        return self._timed("dense", lambda: _completed_work([self._allreduce_dense(t, _op_name(op)) for t in tensors]))

    def allreduce_coalesced(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else _OPS["SUM"])
        self._cpu(tensors, "allreduce_coalesced")

        def run():
            if any(t.is_sparse for t in tensors):
                return _completed_work([self._allreduce_sparse(t, op, None) for t in tensors])
            flat = torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.empty(0)
            self._allreduce_dense(flat, op)
            o = 0
            for t in tensors:
                t.copy_(flat[o:o + t.numel()].view_as(t))
                o += t.numel()
            return _completed_work(tensors)
        return self._timed("dense", run)

    def _dense_route(self, t, op):
        """How a dense allreduce runs: "native" (MPI's allreduce), "complex" (of the real view) or
        "gather" (every rank's copy reduced in rank order); raises for what is unsupported. Local:
        it runs before any communication, so an unsupported call raises here on every rank that
        makes it, never as a peer's abort arriving in the middle of a collective."""
        def no(why):
            return self._fail(UnsupportedError(f"rank {self.rank()}: allreduce {why}", call="zen.torch allreduce"))
        if op not in ("SUM", "AVG", "MAX", "MIN", "PRODUCT", "BAND", "BOR", "BXOR"):
            raise no(f"op {op} is not supported")
        if t.is_complex():
            if op in ("SUM", "AVG"):
                return "complex"
            raise no(f"op {op} on {t.dtype} is not supported (SUM, AVG)")
        if t.dtype not in _TORCH_DTYPES:
            raise no(f"of {t.dtype} is not supported")
        if _TORCH_DTYPES[t.dtype][1] is not None:  # f32, f64, f16, bf16
            if op in ("SUM", "AVG", "MAX", "MIN"):
                return "native"
            if op == "PRODUCT":
                return "gather"
            raise no(f"op {op} on {t.dtype} is not supported")
        if op == "AVG":
            raise no(f"AVG of {t.dtype} (an integer type) is not supported")
        return "gather"

    def _allreduce_dense(self, t, op, check=None):
        route = self._dense_route(t, op)
        if self.options.check_dense if check is None else check:
            self._agree("allreduce", t, _OP_CODE.get(op, 99))
        if route == "native":
            return self._native(t, op)
        if route == "complex":
            real = torch.view_as_real(self._contig(t))
            self._native(real, op)
            if not t.is_contiguous():
                t.copy_(torch.view_as_complex(real))
            return t
        # Integer and bool tensors, PRODUCT and bitwise ops: gather every rank's copy, reduce in rank
        # order (exact; n x the bytes of a native allreduce, meant for small tensors such as DDP's
        # used-parameter map).
        t.copy_(_reduce_rows(self._gather_rows(t), op))
        return t

    def _native(self, t, op):
        buf = self._contig(t)
        self.comm.allreduce(buf, "sum" if op in ("SUM", "AVG") else op.lower())
        if op == "AVG":
            buf.div_(self.size())
        if buf is not t:
            t.copy_(buf)
        return t

    def _sparse_supported(self, t, op):
        """Local checks of a sparse allreduce (before any communication, as _dense_route)."""
        if op not in ("SUM", "AVG"):
            raise self._fail(UnsupportedError(
                f"rank {self.rank()}: sparse allreduce supports SUM and AVG, not {op}", call="zen.torch allreduce"))
        if t.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise self._fail(InvalidArgumentError(
                f"rank {self.rank()}: sparse allreduce of {t.dtype} (zen sums f32, f64, f16, bf16)",
                call="zen.torch allreduce"))

    def _allreduce_sparse(self, t, op, scheme):
        self._sparse_supported(t, op)
        scheme = scheme or self.scheme
        t0 = time.perf_counter()
        self._agree("allreduce_sparse", t, _OP_CODE[op], extra=_scheme_code(scheme))
        t1 = time.perf_counter()
        sd = t.sparse_dim()
        shape = tuple(t.shape)
        rows = math.prod(shape[:sd])
        width = math.prod(shape[sd:])
        key = (shape, t.dtype, scheme, op)
        plan = self.plans.get(key)
        t2 = time.perf_counter()
        if plan is None:
            opts = dict(self.options.plan_options)
            opts["average"] = op == "AVG"
            plan = SparseAllreduce(self.comm, rows * width, max(1, width), t.dtype, scheme, **opts)
            self.plans[key] = plan
            self.stats.plans_created += 1
        t_made = time.perf_counter()
        idx = t._indices()
        vals = t._values()
        if sd == 1:
            lin = idx[0]
        else:
            strides = torch.tensor([math.prod(shape[d + 1:sd]) for d in range(sd)], dtype=torch.int64)
            lin = (idx * strides[:, None]).sum(0)
        lin = self._contig(lin)
        vals = self._contig(vals)
        t3 = time.perf_counter()
        ridx, rval = plan.sparse(lin, vals.reshape(vals.shape[0], width) if vals.dim() > 1 else vals)
        t4 = time.perf_counter()
        st = self.stats
        st.agree_seconds += t1 - t0
        st.zen_seconds += (t4 - t3) + (t_made - t2)  # the call, and the plan's creation when it was made now
        k = ridx.numel()
        if sd == 1:
            out_idx = ridx.view(1, k)
        else:
            out_idx = torch.stack([(ridx // math.prod(shape[d + 1:sd])) % shape[d] for d in range(sd)])
        result = _coalesced_sparse(out_idx, rval.view((k,) + shape[sd:]), shape)
        t.copy_(result)
        return result

    # -- broadcast, allgather, barrier ---------------------------------------------------------

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        self._cpu(tensors, "broadcast")

        def run():
            for t in tensors:
                if t.is_sparse:
                    raise self._fail(UnsupportedError(f"rank {self.rank()}: broadcast of a sparse tensor",
                                                      call="zen.torch broadcast"))
                if self.options.check_dense:
                    self._agree("broadcast", t, root=root)
                buf = self._contig(t)
                self.comm.broadcast(_bytes_view(buf), root)
                if buf is not t:
                    t.copy_(buf)
            return _completed_work(tensors)
        return self._timed("other", run)

    def allgather(self, output_tensors, input_tensors, opts=None):
        self._cpu(input_tensors, "allgather")

        def run():
            for outs, t in zip(output_tensors, input_tensors):
                if len(outs) != self.size() or any(o.numel() != t.numel() or o.dtype != t.dtype for o in outs):
                    raise self._fail(InvalidArgumentError(
                        f"rank {self.rank()}: allgather needs {self.size()} output tensors of {t.numel()} {t.dtype}",
                        call="zen.torch allgather"))
                if self.options.check_dense:
                    self._agree("allgather", t)
                rows = self._gather_rows(t)
                for p, o in enumerate(outs):
                    o.copy_(rows[p].view_as(o))
            return _completed_work(output_tensors)
        return self._timed("other", run)

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        self._cpu([output, input], "allgather")

        def run():
            if output.numel() != self.size() * input.numel() or output.dtype != input.dtype:
                raise self._fail(InvalidArgumentError(
                    f"rank {self.rank()}: all_gather_into_tensor output must hold {self.size()} x {input.numel()} "
                    f"{input.dtype}", call="zen.torch allgather"))
            if self.options.check_dense:
                self._agree("allgather", input)
            rows = self._gather_rows(input)
            output.copy_(rows.view_as(output))
            return _completed_work([output])
        return self._timed("other", run)

    def barrier(self, opts=None):
        return self._timed("other", lambda: (self.comm.barrier(), _completed_work([]))[1])

    # -- reduce_scatter, reduce, gather, scatter, all_to_all -----------------------------------

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else _OPS["SUM"])
        self._cpu(output_tensors, "reduce_scatter")

        def run():
            for out, ins in zip(output_tensors, input_tensors):
                if len(ins) != self.size() or any(i.numel() != out.numel() or i.dtype != out.dtype for i in ins):
                    raise self._fail(InvalidArgumentError(
                        f"rank {self.rank()}: reduce_scatter needs {self.size()} inputs shaped like the output",
                        call="zen.torch reduce_scatter"))
                self._reduce_scatter(out, torch.stack([self._contig(i).view(-1) for i in ins]), op)
            return _completed_work(output_tensors)
        return self._timed("other", run)

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        op = _op_name(opts.reduceOp if opts is not None else _OPS["SUM"])
        self._cpu([output, input], "reduce_scatter")

        def run():
            if input.numel() != self.size() * output.numel() or input.dtype != output.dtype:
                raise self._fail(InvalidArgumentError(
                    f"rank {self.rank()}: reduce_scatter_tensor input must hold {self.size()} x {output.numel()} "
                    f"{output.dtype}", call="zen.torch reduce_scatter"))
            self._reduce_scatter(output, self._contig(input).view(self.size(), -1), op)
            return _completed_work([output])
        return self._timed("other", run)

    def _reduce_scatter(self, out, blocks, op):
        """blocks (size, m): block p goes to rank p; rank r reduces the blocks it receives in rank order."""
        if op not in ("SUM", "AVG", "MAX", "MIN", "PRODUCT", "BAND", "BOR", "BXOR") or out.is_complex() or \
                (op == "AVG" and not out.is_floating_point()) or (op.startswith("B") and out.is_floating_point()):
            raise self._fail(UnsupportedError(f"rank {self.rank()}: reduce_scatter op {op} on {out.dtype}",
                                              call="zen.torch reduce_scatter"))
        self._agree("reduce_scatter", out, _OP_CODE.get(op, 99))
        n, m = blocks.shape[0], blocks.shape[1] if blocks.dim() > 1 else 0
        recv = torch.empty_like(blocks)
        b = m * blocks.element_size()
        self.comm.alltoallv(_bytes_view(blocks), [b] * n, _bytes_view(recv), [b] * n)
        red = _reduce_rows(recv, op)
        out.copy_(red.view_as(out))

    def reduce(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else _OPS["SUM"])
        root = opts.rootRank if opts is not None else 0
        self._cpu(tensors, "reduce")

        def run():
            for t in tensors:
                if t.is_sparse:
                    self._sparse_supported(t, op)
                else:
                    self._dense_route(t, op)
                self._agree("reduce", t, _OP_CODE.get(op, 99), root=root)
                tmp = t.clone()
                if t.is_sparse:
                    self._allreduce_sparse(tmp, op, None)
                else:
                    self._allreduce_dense(tmp, op, check=False)
                if self.rank() == root:
                    t.copy_(tmp)
            return _completed_work(tensors)
        return self._timed("other", run)

    def gather(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        self._cpu(input_tensors, "gather")

        def run():
            for i, t in enumerate(input_tensors):
                outs = output_tensors[i] if self.rank() == root else None
                if outs is not None and (len(outs) != self.size() or any(o.numel() != t.numel() for o in outs)):
                    raise self._fail(InvalidArgumentError(
                        f"rank {root}: gather needs {self.size()} outputs of {t.numel()} elements", call="zen.torch gather"))
                self._agree("gather", t, root=root)
                rows = self._gather_rows(t)
                if outs is not None:
                    for p, o in enumerate(outs):
                        o.copy_(rows[p].view_as(o))
            return _completed_work(output_tensors)
        return self._timed("other", run)

    def scatter(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        self._cpu(output_tensors, "scatter")

        def run():
            for i, out in enumerate(output_tensors):
                n, b = self.size(), out.numel() * out.element_size()
                if self.rank() == root:
                    ins = input_tensors[i]
                    if len(ins) != n or any(x.numel() != out.numel() or x.dtype != out.dtype for x in ins):
                        raise self._fail(InvalidArgumentError(
                            f"rank {root}: scatter needs {n} inputs shaped like the output", call="zen.torch scatter"))
                self._agree("scatter", out, root=root)
                if self.rank() == root:
                    send = torch.stack([self._contig(x).view(-1) for x in ins])
                    sb = [b] * n
                else:
                    send, sb = torch.empty(0, dtype=out.dtype), [0] * n
                recv = torch.empty(out.numel(), dtype=out.dtype)
                rb = [b if p == root else 0 for p in range(n)]
                self.comm.alltoallv(_bytes_view(send), sb, _bytes_view(recv), rb, recv_displs=[0] * n)
                out.copy_(recv.view_as(out))
            return _completed_work(output_tensors)
        return self._timed("other", run)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        self._cpu([output, input], "alltoall")

        def run():
            n = self.size()
            row_in = input[0].numel() * input.element_size() if input.dim() and input.shape[0] else 0
            row_out = output[0].numel() * output.element_size() if output.dim() and output.shape[0] else 0
            ins = list(input_split_sizes) or ([input.shape[0] // n] * n if input.dim() else [0] * n)
            outs = list(output_split_sizes) or ([output.shape[0] // n] * n if output.dim() else [0] * n)
            if sum(ins) != (input.shape[0] if input.dim() else 0) or sum(outs) != (output.shape[0] if output.dim() else 0):
                raise self._fail(InvalidArgumentError(
                    f"rank {self.rank()}: all_to_all split sizes {ins} / {outs} do not add up to the tensors' first "
                    "dimension (or it is not divisible by the group size)", call="zen.torch alltoall"))
            self._agree("alltoall", None, extra=input.element_size())
            src, dst = self._contig(input), torch.empty_like(output) if not output.is_contiguous() else output
            self.comm.alltoallv(_bytes_view(src), [s * row_in for s in ins], _bytes_view(dst),
                                [s * row_out for s in outs])
            if dst is not output:
                output.copy_(dst)
            return _completed_work([output])
        return self._timed("other", run)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        self._cpu(input_tensors, "alltoall")

        def run():
            n = self.size()
            self._agree("alltoall", None, extra=input_tensors[0].element_size() if input_tensors else 0)
            send = torch.cat([self._contig(t).view(-1) for t in input_tensors])
            recv = torch.empty(sum(o.numel() for o in output_tensors), dtype=send.dtype)
            es = send.element_size()
            self.comm.alltoallv(_bytes_view(send), [t.numel() * es for t in input_tensors], _bytes_view(recv),
                                [o.numel() * es for o in output_tensors])
            o = 0
            for p in range(n):
                output_tensors[p].copy_(recv[o:o + output_tensors[p].numel()].view_as(output_tensors[p]))
                o += output_tensors[p].numel()
            return _completed_work(output_tensors)
        return self._timed("other", run)

    # -- point to point ------------------------------------------------------------------------

    def send(self, tensors, dst, tag=0):
        self._cpu(tensors, "send")

        def run():
            for t in tensors:
                self.comm.send(_bytes_view(self._contig(t)), dst, _tag(tag))
            return _completed_work(tensors)
        return self._timed("other", run)

    def recv(self, tensors, src, tag=0):
        self._cpu(tensors, "recv")

        def run():
            for t in tensors:
                buf = self._contig(t)
                self.comm.recv(_bytes_view(buf), src, _tag(tag))
                if buf is not t:
                    t.copy_(buf)
            return _completed_work(tensors)
        return self._timed("other", run)

    def recv_anysource(self, tensors, tag=0):
        raise UnsupportedError("the zen process group needs the source rank of recv (dist.recv(t, src=...))",
                               call="zen.torch recv")

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        raise UnsupportedError("allgather_coalesced is not supported by the zen process group",
                               call="zen.torch allgather_coalesced")


def _tag(tag):
    if not 0 <= int(tag) <= 16383:
        raise InvalidArgumentError(f"tag {tag} is outside [0, 16383] (zen's point-to-point tags)", call="zen.torch")
    return int(tag)


def _scheme_code(s):
    return int.from_bytes(s.encode()[:7].ljust(7, b"\0"), "little")


def _bytes_view(t):
    """A uint8 view of a contiguous tensor (any dtype), for byte collectives."""
    if t.numel() == 0:
        return torch.empty(0, dtype=torch.uint8)
    if t.dtype == torch.bool:
        return t.view(torch.uint8).reshape(-1)
    return t.reshape(-1).view(torch.uint8)


def _reduce_rows(rows, op):
    """Reduce rows[0], rows[1], ... in rank order with a torch.distributed op (16-bit floats in float32)."""
    wide = rows.float() if rows.dtype in (torch.float16, torch.bfloat16) else rows
    if rows.dtype == torch.bool:
        wide = rows.to(torch.uint8)
    fn = {"SUM": torch.add, "AVG": torch.add, "MAX": torch.maximum, "MIN": torch.minimum, "PRODUCT": torch.mul,
          "BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
    if rows.dtype == torch.bool and op == "SUM":
        fn = torch.bitwise_or
    acc = functools.reduce(fn, [wide[p] for p in range(1, rows.shape[0])], wide[0].clone())
    if op == "AVG":
        acc = acc / rows.shape[0]
    return acc.to(rows.dtype)


# ---------------------------------------------------------------------------------------------
# Creation: the backend "zen" and the rendezvous "mpi://"


def _mpi():
    from mpi4py import MPI
    return MPI


def _launcher_hint():
    for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS", "MPI_LOCALNRANKS"):
        if v in os.environ:
            return ""
    return " (no MPI launcher detected: start every rank with mpirun -np N or srun)"


def _create(backend_opts, pg_options):
    """torch's creator (extended API): the group's ranks are MPI ranks of `comm` (COMM_WORLD)."""
    options = pg_options if isinstance(pg_options, Options) else Options()
    MPI = _mpi()
    world = options.comm if options.comm is not None else MPI.COMM_WORLD
    rank, size = backend_opts.group_rank, backend_opts.group_size
    members = list(backend_opts.global_ranks_in_group)
    mpi_comm = None
    if not members:  # the default group: torch's ranks must be MPI's
        problem = None
        if MPI.Query_thread() < MPI.THREAD_SERIALIZED:
            problem = (UnsupportedError, "MPI was initialized below MPI_THREAD_SERIALIZED; torch may call the group "
                       "from its autograd thread: initialize MPI with MPI_THREAD_MULTIPLE (mpi4py's default)",
                       "zen.torch")
        elif world.Get_rank() != rank or world.Get_size() != size:
            problem = (InvalidUsageError,
                       f"torch.distributed says rank {rank} of {size} but MPI says rank {world.Get_rank()} of "
                       f"{world.Get_size()}{_launcher_hint()}; the zen backend uses MPI's ranks: pass "
                       "init_method='mpi://' (or rank/world_size equal to MPI's)", "zen.torch init_process_group")
        _agree(world, problem)
        base = world
    else:
        gr = dist.get_rank()
        if world.Get_rank() != gr or world.Get_size() != dist.get_world_size():
            raise InvalidUsageError(
                f"the default group's rank {gr} of {dist.get_world_size()} is not MPI's rank {world.Get_rank()} of "
                f"{world.Get_size()}; zen groups need the default group's ranks to be MPI's (init_method='mpi://')",
                call="zen.torch new_group")
        if sorted(members) == list(range(world.Get_size())):
            base = world
        else:
            grp = world.Get_group().Incl(sorted(members))
            mpi_comm = world.Create_group(grp, tag=1733)
            grp.Free()
            base = mpi_comm
    comm = Communicator.from_mpi(base)
    timeout = backend_opts.timeout
    if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
        comm.set_timeout(min(timeout.total_seconds(), 2 ** 31 / 1000 - 1))
    return ProcessGroupZen(rank, size, comm, options, mpi_comm)


def _agree(world, problem):
    """The default group's refusal, agreed on every rank of `world` before any rank raises (None: no
    problem here). Every rank raises: its own error, or RemoteError quoting the first rank that refused.
    Agreeing also holds every rank here until all have finished torch's rendezvous: torch 1.13's
    TCPStore client connects a second socket after the store counted it, so a rank 0 that raised and
    left at once would take the store along and leave a slower peer retrying that connect for the
    whole timeout (30 minutes by default)."""
    found = world.allgather(None if problem is None else (problem[0].__name__, problem[1], problem[2]))
    if problem is not None:
        raise problem[0](problem[1], call=problem[2])
    first = next(((r, p) for r, p in enumerate(found) if p is not None), None)
    if first is not None:
        r, (kind, msg, call) = first
        raise _capi.RemoteError(f"rank {world.Get_rank()} of {world.Get_size()}: rank {r} refused the group "
                                f"({kind}: {call}: {msg})", call="zen.torch init_process_group")


def _mpi_rendezvous(url, timeout=datetime.timedelta(minutes=30), **kwargs):
    """init_method="mpi://": rank and world size from MPI's COMM_WORLD, a TCPStore on rank 0 (an
    ephemeral port, its address broadcast over MPI). Works for any backend (Gloo too)."""
    from urllib.parse import parse_qs, urlparse
    MPI = _mpi()
    w = MPI.COMM_WORLD
    rank, size = w.Get_rank(), w.Get_size()
    q = {k: int(v[0]) for k, v in parse_qs(urlparse(url).query).items() if k in ("rank", "world_size")}
    if q.get("rank", rank) not in (rank, -1) or q.get("world_size", size) not in (size, -1):
        raise InvalidUsageError(f"mpi:// rendezvous: rank {q.get('rank')} of {q.get('world_size')} was asked for, "
                                f"MPI says rank {rank} of {size}{_launcher_hint()}", call="zen.torch rendezvous")
    local = w.Split_type(MPI.COMM_TYPE_SHARED)
    one_node = local.Get_size() == size
    local.Free()
    host = os.environ.get("MASTER_ADDR") or ("127.0.0.1" if one_node else socket.gethostname())
    store, port = None, None
    if rank == 0:
        store = dist.TCPStore(host, 0, size, True, timeout, wait_for_workers=False)
        port = store.port
    host, port = w.bcast((host, port), root=0)
    if rank != 0:
        store = dist.TCPStore(host, port, size, False, timeout)
    # Rank 0's store does not wait for its clients (the port is only known after it exists): hold every
    # rank until all have connected, so that a rank whose next step fails at once cannot close the store
    # under a peer still connecting (that peer would retry for the whole timeout).
    w.Barrier()
    yield store, rank, size
    raise RuntimeError("mpi:// rendezvous cannot be repeated")


def _register():
    _register_backend(BACKEND, _create)
    import importlib
    rz = importlib.import_module("torch.distributed.rendezvous")  # the module (the package attribute is a function)
    handlers = getattr(rz, "_rendezvous_handlers", {})
    if "mpi" not in handlers:
        rz.register_rendezvous_handler("mpi", _mpi_rendezvous)


_register()


# ---------------------------------------------------------------------------------------------
# Loops without DDP


def group_of(group=None):
    """The ProcessGroupZen of `group` (None: the default group); InvalidUsageError if it is not zen's."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupZen):
        raise InvalidUsageError(f"{pg!r} is not a zen process group: create it with init_process_group('zen') or "
                                "dist.new_group(backend='zen')", call="zen.torch")
    return pg


def allreduce_sparse_(tensor, group=None, scheme=None, op=dist.ReduceOp.SUM):
    """Sum (op=AVG: average) a sparse COO CPU tensor over `group` in place, through a zen plan of
    `scheme` (default: the group's). Returns the tensor, now coalesced. Collective."""
    pg = group_of(group)
    if not tensor.is_sparse:
        raise pg._fail(InvalidArgumentError(f"rank {pg.rank()}: allreduce_sparse_ takes a sparse COO tensor, got "
                                            f"{tensor.layout}", call="zen.torch allreduce_sparse_"))
    pg._cpu([tensor], "allreduce_sparse_")
    pg._timed("sparse", lambda: pg._allreduce_sparse(tensor, _op_name(op), scheme))
    return tensor


def stats(group=None):
    """This rank's Stats of a zen group: calls and seconds (sparse, dense, other), plans created."""
    return group_of(group).stats


def last_report(tensor_shape, dtype=torch.float32, group=None, scheme=None, op="SUM"):
    """The zen Report of the cached plan for sparse tensors of this shape and dtype (None if none ran)."""
    pg = group_of(group)
    p = pg.plans.get((tuple(tensor_shape), dtype, scheme or pg.scheme, op))
    return p.report() if p is not None else None


__all__ = ["BACKEND", "Options", "ProcessGroupZen", "Stats", "allreduce_sparse_", "group_of", "stats", "last_report",
           "dtype_name"]
