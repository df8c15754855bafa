"""Checks of the torch.distributed backend "zen" (run by run_checks.py under mpirun): DDP parity with
Gloo (exactly representable data: 1e-6 relative; the word2vec example: 1e-5), dist.all_reduce of
sparse tensors (coalesced, with duplicates, hybrid, two sparse dims, empty ranks, every dtype, SUM and
AVG) and of dense ones, every other collective the group provides, the plan cache, mismatched
shapes across ranks, unsupported ops and devices, and an error inside DDP's backward reaching every
rank."""
import datetime
import hashlib
import os
import sys
import time
import types

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

import zen
import zen.torch as zt
from checkutil import Skip

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "python")
_groups = {}


def _init(ctx):
    if not dist.is_initialized():
        dist.init_process_group("zen", init_method="mpi://", timeout=datetime.timedelta(seconds=ctx.timeout))
        _groups["gloo"] = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=ctx.timeout))
        for s in ("balanced", "allgather", "auto"):
            _groups[s] = dist.new_group(backend="zen", pg_options=zt.Options(scheme=s),
                                        timeout=datetime.timedelta(seconds=ctx.timeout))
    return dist.distributed_c10d._get_default_group()


def fresh(ctx, **opts):
    """A new zen group (every rank calls it): the error checks poison theirs."""
    _init(ctx)
    return dist.new_group(backend="zen", pg_options=zt.Options(**opts), timeout=datetime.timedelta(seconds=ctx.timeout))


def finish(ctx):
    if dist.is_initialized():
        dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------


def init_and_basics(ctx):
    pg = _init(ctx)
    assert dist.get_backend() == "zen" and isinstance(pg, zt.ProcessGroupZen)
    assert dist.get_rank() == ctx.rank and dist.get_world_size() == ctx.n
    assert zt.group_of() is pg and pg.scheme == os.environ.get("ZEN_SCHEME", "auto")
    dist.barrier()
    t = torch.tensor([float(ctx.rank)])
    dist.all_reduce(t)
    assert t.item() == ctx.n * (ctx.n - 1) / 2


def _exact_model():
    """EmbeddingBag(sparse) + Linear with dyadic weights: every gradient and update is exact."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.EmbeddingBag(57, 4, mode="sum", sparse=True), nn.Linear(4, 2))
    with torch.no_grad():
        m[0].weight.copy_(torch.randint(-8, 8, (57, 4)).float() / 16)
        m[1].weight.copy_(torch.randint(-8, 8, (2, 4)).float() / 8)
        m[1].bias.copy_(torch.tensor([0.5, -0.25]))
    return m


def _train_exact(group, rank, steps=4):
    m = _exact_model()
    ddp = nn.parallel.DistributedDataParallel(m, process_group=group)
    opt = torch.optim.SGD(m.parameters(), lr=1 / 16)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randint(0, 57, (6, 3), generator=g)
        x[0, 0] = 0  # index 0 and the last row present, duplicates within a bag
        x[1] = 56
        opt.zero_grad(set_to_none=True)
        (ddp(x) * torch.tensor([1.0, -0.5])).sum().backward()
        opt.step()
    return [p.detach().clone() for p in m.parameters()]


def _rel(a, b):
    return max(float((x - y).abs().max()) / max(float(x.abs().max()), 1e-30) for x, y in zip(a, b))


def ddp_parity_exact(ctx):
    _init(ctx)
    ref = _train_exact(_groups["gloo"], ctx.rank)
    for s in ("balanced", "allgather", "auto"):
        got = _train_exact(_groups[s], ctx.rank)
        d = _rel(ref, got)
        assert d <= 1e-6, f"zen:{s} vs gloo after 4 steps: max rel diff {d:.2e}"
    got = _train_exact(None, ctx.rank)  # the default group: init_process_group("zen")
    assert _rel(ref, got) <= 1e-6
    ctx.record("weights", hashlib.sha1(b"".join(p.numpy().tobytes() for p in got)).hexdigest())


def ddp_parity_word2vec(ctx):
    _init(ctx)
    sys.path.insert(0, EXAMPLES)
    import ddp_embedding as ex
    a = ex.parse(["--corpus", ctx.args.corpus, "--steps", "8", "--batch", "32", "--dim", "8", "--interval", "4",
                  "--warmup", "1"])
    c = ex.Corpus(a.corpus)
    quiet = (lambda *_: None)
    ref = ex.train(c, a, "gloo", _groups["gloo"], quiet)
    for s in ("balanced", "allgather"):
        o = ex.train(c, a, f"zen:{s}", _groups[s], quiet)
        d = _rel(ref.params, o.params)
        assert d <= 1e-5 and o.ranks_agree, f"word2vec zen:{s} vs gloo: {d:.2e}"
        assert all(abs(x[2] - y[2]) <= 1e-5 * abs(y[2]) for x, y in zip(o.curve, ref.curve))


def _sparse_input(rank, shape, kind, dtype=torch.float32):
    """Rank's sparse COO tensor: "dup" (uncoalesced, duplicates, index 0 and the last row), "coal",
    "empty"; shape (rows, *dense) with one sparse dim, or (a, b) with two ("two")."""
    g = torch.Generator().manual_seed(7 * rank + 1)
    if kind == "empty":
        return torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64), torch.zeros((0,) + shape[1:], dtype=dtype),
                                       shape)
    if kind == "two":
        k = 6
        idx = torch.stack([torch.randint(0, shape[0], (k,), generator=g), torch.randint(0, shape[1], (k,), generator=g)])
        idx[:, 0] = 0
        idx[:, 1] = torch.tensor([shape[0] - 1, shape[1] - 1])
        idx[:, 2] = idx[:, 0]
        vals = torch.randint(-4, 5, (k,), generator=g).to(dtype)
        return torch.sparse_coo_tensor(idx, vals, shape)
    k = 7
    rows = torch.randint(0, shape[0], (k,), generator=g)
    rows[0], rows[1], rows[2] = 0, shape[0] - 1, 0
    vals = torch.randint(-4, 5, (k,) + shape[1:], generator=g).to(dtype)
    t = torch.sparse_coo_tensor(rows.view(1, -1), vals, shape)
    return t.coalesce() if kind == "coal" else t


def _dense_sum(n, shape, kinds, dtype):
    return sum(_sparse_input(r, shape, kinds[r], dtype).to(torch.float64).to_dense() for r in range(n))


def sparse_all_reduce(ctx):
    _init(ctx)
    n, r = ctx.n, ctx.rank
    cases = [((31, 3), "dup"), ((31, 3), "coal"), ((13, 3, 2), "dup"), ((7, 9), "two"), ((31, 3), "one_empty"),
             ((31, 3), "all_empty"), ((1, 1), "dup")]
    for shape, kind in cases:
        kinds = {"one_empty": ["dup"] + ["empty"] * (n - 1), "all_empty": ["empty"] * n}.get(kind, [kind] * n)
        for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
                t = _sparse_input(r, shape, kinds[r], dtype)
                want = _dense_sum(n, shape, kinds, dtype)
                if op == dist.ReduceOp.AVG:
                    want = want / n
                w = dist.all_reduce(t, op=op, async_op=True)
                w.wait()
                res = w.get_future().value()[0]
                for got, what in ((t, "in place"), (res, "future")):
                    assert got.is_sparse and got.is_coalesced(), f"{shape} {kind} {dtype}: {what} not coalesced"
                    # SUM of small integers is exact; AVG divides once more (exact for n = 1, 2, 4)
                    ulp = {torch.float32: 2.0 ** -23, torch.float64: 2.0 ** -52, torch.float16: 2.0 ** -10,
                           torch.bfloat16: 2.0 ** -7}[dtype]
                    tol = 0 if op == dist.ReduceOp.SUM or n in (1, 2, 4) else ulp * float(want.abs().max())
                    err = float((got.to(torch.float64).to_dense() - want).abs().max()) if want.numel() else 0.0
                    assert err <= tol, f"{shape} {kind} {dtype} {op}: {what} off by {err}"
    # loops without DDP: the helper, with a scheme of its own
    t = _sparse_input(r, (31, 3), "dup")
    out = zt.allreduce_sparse_(t, scheme="allgather", op=dist.ReduceOp.AVG)
    # zen's AVG: the f32 rounding of (exact sum) / n
    assert out is t and torch.equal(t.to_dense(), (_dense_sum(n, (31, 3), ["dup"] * n, torch.float32) / n).float())
    rep = zt.last_report((31, 3), scheme="allgather", op="AVG")
    assert rep is not None and rep.scheme == "allgather"
    # empty gradients from a real model: a rank whose batch touches nothing
    emb = nn.Embedding(40, 4, sparse=True)
    x = torch.tensor([1, 2, 39]) if r == 0 else torch.tensor([], dtype=torch.int64)
    emb(x).sum().backward()
    dist.all_reduce(emb.weight.grad)
    g = emb.weight.grad.to_dense()
    assert torch.equal(g[[1, 2, 39]], torch.ones(3, 4)) and float(g.abs().sum()) == 12


def dense_collectives(ctx):
    _init(ctx)
    n, r = ctx.n, ctx.rank
    R = dist.ReduceOp
    base = torch.arange(12, dtype=torch.float64).view(3, 4)
    ranks = [base + q for q in range(n)]
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for op, f in ((R.SUM, lambda xs: sum(xs)), (R.AVG, lambda xs: sum(xs) / n), (R.MAX, lambda xs: torch.stack(xs).amax(0)),
                      (R.MIN, lambda xs: torch.stack(xs).amin(0)), (R.PRODUCT, lambda xs: torch.stack(xs).prod(0))):
            if op == R.PRODUCT and dtype in (torch.float16, torch.bfloat16):
                continue
            t = (base + r).to(dtype)
            dist.all_reduce(t, op=op)
            want = f(ranks).to(dtype)
            assert torch.allclose(t.double(), want.double(), rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-12), \
                f"all_reduce {dtype} {op}"
    for dtype in (torch.int32, torch.int64, torch.uint8):
        for op, f in ((R.SUM, lambda xs: sum(xs)), (R.MAX, lambda xs: max(xs)), (R.MIN, lambda xs: min(xs)),
                      (R.BAND, lambda xs: np.bitwise_and.reduce(xs)), (R.BOR, lambda xs: np.bitwise_or.reduce(xs)),
                      (R.BXOR, lambda xs: np.bitwise_xor.reduce(xs))):
            t = torch.tensor([3 + r, 5 * r + 1, 7], dtype=dtype)
            dist.all_reduce(t, op=op)
            cols = [[3 + q for q in range(n)], [5 * q + 1 for q in range(n)], [7] * n]
            want = [int(f(np.array(c))) for c in cols]
            assert t.tolist() == [w % 256 if dtype == torch.uint8 else w for w in want], f"all_reduce {dtype} {op}: {t}"
    b = torch.tensor([r == 0, r == n - 1, True])
    dist.all_reduce(b, op=R.MAX)
    assert b.tolist() == [True, True, True]
    c = torch.tensor([1 + 1j * r, 2], dtype=torch.complex64)
    dist.all_reduce(c)
    assert c.tolist() == [complex(n, n * (n - 1) / 2), complex(2 * n, 0)]
    nc = (torch.arange(8.0).view(2, 4) + r)[:, ::2]  # a non-contiguous view
    dist.all_reduce(nc)
    assert torch.equal(nc, torch.stack([torch.arange(8.0).view(2, 4)[:, ::2] + q for q in range(n)]).sum(0))
    flat = [torch.full((2,), float(r)), torch.full((3,), 2.0 * r)]
    dist.all_reduce_coalesced(flat)
    s = n * (n - 1) / 2
    assert flat[0].tolist() == [s, s] and flat[1].tolist() == [2 * s] * 3
    for root in range(n):
        t = torch.full((5,), float(r))
        dist.broadcast(t, src=root)
        assert torch.all(t == root)
    outs = [torch.empty(2, 3) for _ in range(n)]
    dist.all_gather(outs, torch.full((2, 3), float(r)))
    assert all(torch.all(o == q) for q, o in enumerate(outs))
    big = torch.empty(n * 4, dtype=torch.int64)
    dist.all_gather_into_tensor(big, torch.arange(4) + 10 * r)
    assert big.tolist() == [10 * q + i for q in range(n) for i in range(4)]
    dist.barrier()
    ins = [torch.full((3,), float(r * 10 + p)) for p in range(n)]
    out = torch.empty(3)
    dist.reduce_scatter(out, ins)
    assert torch.all(out == sum(q * 10 + r for q in range(n)))
    out2 = torch.empty(2, dtype=torch.int32)
    dist.reduce_scatter_tensor(out2, torch.arange(2 * n, dtype=torch.int32) + r, op=R.MAX)
    assert out2.tolist() == [2 * r + (n - 1), 2 * r + 1 + (n - 1)]
    t = torch.full((4,), float(r + 1))
    dist.reduce(t, dst=n - 1, op=R.PRODUCT)
    if r == n - 1:
        assert torch.all(t == float(np.prod(range(1, n + 1))))
    gl = [torch.empty(2) for _ in range(n)] if r == 0 else None
    dist.gather(torch.full((2,), float(r)), gather_list=gl, dst=0)
    if r == 0:
        assert all(torch.all(g == q) for q, g in enumerate(gl))
    sc = torch.empty(3)
    dist.scatter(sc, scatter_list=[torch.full((3,), 5.0 * q) for q in range(n)] if r == 0 else None, src=0)
    assert torch.all(sc == 5.0 * r)
    a2a_out = torch.empty(n * 2)
    dist.all_to_all_single(a2a_out, torch.arange(n * 2, dtype=torch.float32) + 100 * r)
    assert a2a_out.tolist() == [float(100 * q + 2 * r + i) for q in range(n) for i in range(2)]
    # uneven splits: rank r sends q + 1 rows to rank q
    inp = torch.full((sum(q + 1 for q in range(n)), 2), float(r))
    outp = torch.empty(n * (r + 1), 2)
    dist.all_to_all_single(outp, inp, output_split_sizes=[r + 1] * n, input_split_sizes=[q + 1 for q in range(n)])
    assert outp[:, 0].tolist() == [float(q) for q in range(n) for _ in range(r + 1)]
    ol = [torch.empty(1) for _ in range(n)]
    dist.all_to_all(ol, [torch.tensor([float(10 * r + q)]) for q in range(n)])
    assert [o.item() for o in ol] == [float(10 * q + r) for q in range(n)]
    if n > 1:  # a ring: zen's send is buffered, so every rank sends first
        dist.send(torch.tensor([r * 1.5]), dst=(r + 1) % n)
        got = torch.empty(1)
        dist.recv(got, src=(r - 1) % n)
        assert got.item() == ((r - 1) % n) * 1.5
        req = dist.isend(torch.tensor([float(r)]), dst=(r + 1) % n, tag=5)
        rb = torch.empty(1)
        dist.irecv(rb, src=(r - 1) % n, tag=5).wait()
        req.wait()
        assert rb.item() == float((r - 1) % n)
    dist.barrier()


def plan_cache_reuse(ctx):
    g = fresh(ctx, scheme="balanced")
    pg = zt.group_of(g)
    torch.manual_seed(3)
    m = nn.ModuleList([nn.Embedding(30, 4, sparse=True), nn.Embedding(20, 6, sparse=True)])
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(ctx.rank)

    class Wrap(nn.Module):
        def __init__(self, ml):
            super().__init__()
            self.ml = ml

        def forward(self, a, b):
            return self.ml[0](a).sum() + self.ml[1](b).sum()
    ddp = nn.parallel.DistributedDataParallel(Wrap(m), process_group=g)
    seen = []
    for step in range(6):
        opt.zero_grad(set_to_none=True)
        ddp(torch.randint(0, 30, (5,), generator=gen), torch.randint(0, 20, (7,), generator=gen)).backward()
        opt.step()
        seen.append((pg.stats.plans_created, pg.stats.sparse_calls))
    assert all(p == 2 for p, _ in seen), f"plans per step: {seen} (one per sparse parameter shape, made once)"
    assert [c for _, c in seen] == [2 * (k + 1) for k in range(6)], seen
    assert len(pg.plans) == 2
    dist.destroy_process_group(g)


def scheme_per_group_option_and_env(ctx):
    """The scheme a group's sparse allreduces run: Options(scheme=...), else ZEN_SCHEME, else auto;
    allreduce_sparse_(scheme=...) per call. Checked in the plans' reports (what actually ran)."""
    _init(ctx)
    n = ctx.n
    for s in ("balanced", "allgather"):
        t = _sparse_input(ctx.rank, (31, 3), "dup")
        dist.all_reduce(t, group=_groups[s])
        assert zt.last_report((31, 3), group=_groups[s]).scheme == s
    old = os.environ.get("ZEN_SCHEME")
    os.environ["ZEN_SCHEME"] = "sparse_ps"
    try:
        g = fresh(ctx)
        g2 = fresh(ctx, scheme="allgather")  # the option wins over the environment
    finally:
        if old is None:
            del os.environ["ZEN_SCHEME"]
        else:
            os.environ["ZEN_SCHEME"] = old
    assert zt.group_of(g).scheme == "sparse_ps" and zt.group_of(g2).scheme == "allgather"
    for grp, s in ((g, "sparse_ps"), (g2, "allgather")):
        t = _sparse_input(ctx.rank, (31, 3), "dup")
        dist.all_reduce(t, group=grp)
        assert zt.last_report((31, 3), group=grp).scheme == s
        assert torch.equal(t.to_dense(), _dense_sum(n, (31, 3), ["dup"] * n, torch.float32).float())
    t = _sparse_input(ctx.rank, (31, 3), "dup")
    zt.allreduce_sparse_(t, group=g, scheme="balanced")
    assert zt.last_report((31, 3), group=g, scheme="balanced").scheme == "balanced"
    assert zt.group_of(g).stats.plans_created == 2
    dist.destroy_process_group(g)
    dist.destroy_process_group(g2)


def mismatched_shapes_same_error_everywhere(ctx):
    if ctx.n == 1:
        raise Skip("needs two ranks")
    for what in ("sparse", "dense"):
        g = fresh(ctx)
        rows = 20 if ctx.rank == ctx.n - 1 else 10
        t = _sparse_input(ctx.rank, (rows, 3), "dup") if what == "sparse" else torch.ones(rows, 3)
        t0 = time.perf_counter()
        try:
            dist.all_reduce(t, group=g)
            raise AssertionError(f"{what}: mismatched shapes accepted")
        except zen.InvalidUsageError as e:
            msg = str(e)
        assert time.perf_counter() - t0 < ctx.timeout / 2
        ctx.record(f"{what} mismatch error", msg)  # every rank raises the same error
        assert "(10, 3)" in msg and "(20, 3)" in msg and f"rank {ctx.n - 1}" in msg, msg
        try:
            dist.barrier(group=g)
            raise AssertionError("the group stays usable after the mismatch")
        except zen.InvalidUsageError as e:
            assert "refuses further use" in str(e)
        dist.destroy_process_group(g)


def unsupported_ops_and_devices(ctx):
    _init(ctx)
    cases = [
        ("meta tensor", lambda g: dist.all_reduce(torch.empty(3, device="meta"), group=g), zen.UnsupportedError,
         "allreduce got a meta tensor"),
        ("sparse MAX", lambda g: dist.all_reduce(_sparse_input(ctx.rank, (9, 2), "dup"), op=dist.ReduceOp.MAX, group=g),
         zen.UnsupportedError, "SUM and AVG, not MAX"),
        ("sparse int", lambda g: dist.all_reduce(torch.sparse_coo_tensor([[0]], torch.tensor([1]), (4,)), group=g),
         zen.InvalidArgumentError, "torch.int64"),
        ("recv from any source", lambda g: dist.recv(torch.empty(1), group=g), zen.UnsupportedError, "source rank"),
        ("tag", lambda g: dist.send(torch.empty(1), dst=0, tag=20000, group=g) if ctx.rank == 0 else
         dist.recv(torch.empty(1), src=0, tag=20000, group=g), zen.InvalidArgumentError, "tag 20000"),
        ("integer AVG", lambda g: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.AVG, group=g),
         zen.UnsupportedError, "AVG"),
    ]
    for name, call, cls, text in cases:
        g = fresh(ctx)
        try:
            call(g)
            raise AssertionError(f"{name}: accepted")
        except cls as e:
            assert text in str(e), f"{name}: {e}"
        dist.destroy_process_group(g)
    # an op the group cannot provide at all: torch's own error names it
    g = fresh(ctx)
    try:
        dist.monitored_barrier(group=g)
        raise AssertionError("monitored_barrier accepted")
    except (RuntimeError, NotImplementedError, AttributeError) as e:
        assert "monitored_barrier" in str(e) or "zen" in str(e).lower(), str(e)
    dist.destroy_process_group(g)


def error_in_ddp_backward_reaches_every_rank(ctx):
    if ctx.n == 1:
        raise Skip("needs two ranks")
    g = fresh(ctx, scheme="balanced")
    pg = zt.group_of(g)
    if ctx.rank == 0:
        pg.options.plan_options = {"hash_functions": 0}  # rank 0's plan creation fails inside backward
    torch.manual_seed(5)
    m = nn.Embedding(50, 4, sparse=True)
    ddp = nn.parallel.DistributedDataParallel(m, process_group=g)
    t0 = time.perf_counter()
    try:
        ddp(torch.tensor([1, 2, 3])).sum().backward()
        raise AssertionError("backward succeeded")
    except Exception as e:  # noqa: BLE001 - DDP's reducer rethrows the group's error from C++
        msg = str(e)
    assert time.perf_counter() - t0 < ctx.timeout / 2
    assert "hash_functions" in msg and ("rank 0" in msg or ctx.rank == 0), msg
    dist.destroy_process_group(g)
    # Any exception inside an operation (here a torch-side failure injected on the last rank, not a
    # zen error) poisons the group: the peers raise RemoteError at once instead of waiting.
    g = fresh(ctx)
    pg = zt.group_of(g)
    if ctx.rank == ctx.n - 1:
        def broken(t, op):
            raise RuntimeError("injected failure inside the group's allreduce")
        pg._native = broken
    t0 = time.perf_counter()
    try:
        dist.all_reduce(torch.ones(3), group=g)
        raise AssertionError("the allreduce succeeded")
    except RuntimeError as e:
        assert ctx.rank == ctx.n - 1 and "injected" in str(e), str(e)
    except zen.RemoteError as e:
        assert f"rank {ctx.n - 1}" in str(e) and "RuntimeError: injected" in str(e), str(e)
    assert time.perf_counter() - t0 < ctx.timeout / 2
    dist.destroy_process_group(g)


def ranks_checked_against_mpi(ctx):
    _init(ctx)
    if ctx.n > 1:
        bo = types.SimpleNamespace(group_rank=(ctx.rank + 1) % ctx.n, group_size=ctx.n, global_ranks_in_group=[],
                                   timeout=datetime.timedelta(seconds=10))
        try:
            zt._create(bo, None)
            raise AssertionError("a rank different from MPI's was accepted")
        except zen.InvalidUsageError as e:
            assert f"MPI says rank {ctx.rank} of {ctx.n}" in str(e), str(e)
    bo = types.SimpleNamespace(group_rank=ctx.rank, group_size=ctx.n + 1, global_ranks_in_group=[],
                               timeout=datetime.timedelta(seconds=10))
    try:
        zt._create(bo, None)
        raise AssertionError("a size different from MPI's was accepted")
    except zen.InvalidUsageError as e:
        assert f"of {ctx.n + 1} but MPI says" in str(e), str(e)
    try:
        next(zt._mpi_rendezvous(f"mpi://?rank={ctx.rank}&world_size={ctx.n + 3}"))
        raise AssertionError("mpi:// accepted a wrong world size")
    except zen.InvalidUsageError as e:
        assert "MPI says" in str(e)
    # a sub-group of the first ranks (MPI_Comm_create_group) works and leaves the others out
    members = list(range(max(1, ctx.n - 1)))
    g = dist.new_group(ranks=members, backend="zen", timeout=datetime.timedelta(seconds=ctx.timeout))
    if ctx.rank in members:
        t = torch.tensor([1.0])
        dist.all_reduce(t, group=g)
        assert t.item() == len(members)
        dist.destroy_process_group(g)


CHECKS = [(f.__name__, f) for f in (
    init_and_basics, ddp_parity_exact, ddp_parity_word2vec, sparse_all_reduce, dense_collectives, plan_cache_reuse,
    scheme_per_group_option_and_env, mismatched_shapes_same_error_everywhere, unsupported_ops_and_devices,
    error_in_ddp_backward_reaches_every_rank, ranks_checked_against_mpi)]
