"""Checks of zen's Python API over the C API (run by run_checks.py under mpirun): every scheme,
option, dtype and index width against an exact reference (small integers), non-blocking calls,
sub-communicators from MPI_Comm_split, reports, the communicator collectives, errors per
zenResult_t and an error on one rank reaching every rank's call without a hang."""
import ctypes
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

import zen

from checkutil import Skip

R, D = 103, 2  # rows (not divisible by 2..8) and row width
SCHEMES = ["balanced", "dense", "dense_native", "allgather", "sparcml", "omnireduce", "sparse_ps", "auto",
           "hierarchical", "hier_allgather"]


def rank_input(r, rows=R, width=D, kind="mixed"):
    """Rank r's indices (int64) and float64 values (small integers): index 0 and rows-1 present, a
    duplicate of row 0, two rank-dependent rows; "empty": none; "full": every row."""
    if kind == "empty":
        return np.zeros(0, np.int64), np.zeros(0)
    if kind == "full":
        idx = np.arange(rows, dtype=np.int64)[::-1].copy()
    else:
        idx = np.array([0, rows - 1, (5 * r + 2) % rows, 0, (7 * r + 11) % rows], np.int64)
    vals = ((np.arange(len(idx) * width) * 3 + r) % 7 - 3).astype(np.float64)
    return idx, vals


def reference(n, rows=R, width=D, kinds=None):
    dense = np.zeros(rows * width)
    present = np.zeros(rows, bool)
    for r in range(n):
        idx, vals = rank_input(r, rows, width, kinds[r] if kinds else "mixed")
        for k, i in enumerate(idx):
            dense[i * width:(i + 1) * width] += vals[k * width:(k + 1) * width]
            present[i] = True
    return dense, present


def to_dtype(x, dtype):
    x = np.asarray(x, np.float64)
    if dtype == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.astype({"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype])


def from_dtype(x, dtype):
    if dtype == "bf16":
        return (np.asarray(x).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(x, np.float64)


def world(ctx, timeout=None):
    return zen.Communicator.from_mpi(MPI.COMM_WORLD, timeout=timeout or ctx.timeout)


def check_sparse_result(got_idx, got_val, dense, present, width, dtype, what):
    want_idx = np.nonzero(present)[0]
    assert np.array_equal(np.asarray(got_idx), want_idx), f"{what}: indices {np.asarray(got_idx)} != {want_idx}"
    want_val = dense.reshape(-1, width)[want_idx].reshape(-1)
    got = from_dtype(np.asarray(got_val).reshape(-1), dtype)
    assert np.array_equal(got, want_val), f"{what}: values differ at {np.nonzero(got != want_val)[0][:5]}"


def run_plan(ctx, comm, scheme, dtype="f32", itype=np.int64, kinds=None, rows=R, width=D, **opts):
    """Dense and sparse calls of one plan on this rank's input, checked against the reference."""
    kind = kinds[ctx.rank] if kinds else "mixed"
    idx, vals = rank_input(ctx.rank, rows, width, kind)
    dense, present = reference(ctx.n, rows, width, kinds)
    with zen.SparseAllreduce(comm, rows * width, width, dtype, scheme, **opts) as p:
        out = p.dense(idx.astype(itype), to_dtype(vals, dtype))
        assert np.array_equal(from_dtype(out, dtype), dense), f"{scheme} {dtype} {itype.__name__} dense"
        i2, v2 = p.sparse(idx.astype(itype), to_dtype(vals, dtype))
        check_sparse_result(i2, v2, dense, present, width, dtype, f"{scheme} {dtype} {itype.__name__} sparse")
        return p.report()


# ---------------------------------------------------------------------------------------------


def version(ctx):
    assert zen.__version__ == zen.lib().dll.zenGetVersionString().decode()
    if ctx.args.expect_version:
        assert zen.__version__ == ctx.args.expect_version, f"{zen.__version__} != {ctx.args.expect_version}"
    mj, mn = ctypes.c_int(), ctypes.c_int()
    zen.lib().dll.zenGetVersion(ctypes.byref(mj), ctypes.byref(mn))
    assert zen.__version__.startswith(f"{mj.value}.{mn.value}.")


def every_scheme_both_index_widths(ctx):
    with world(ctx) as c:
        for s in SCHEMES:
            opts = {"node_size": 2} if s == "hierarchical" and ctx.n % 2 == 0 else {}
            if s == "auto":
                opts = {"auto_trials": 1}
            for it in (np.int32, np.int64):
                run_plan(ctx, c, s, "f32", it, **opts)


def every_dtype(ctx):
    with world(ctx) as c:
        for dt in ("f32", "f64", "f16", "bf16"):
            for s in ("balanced", "allgather", "sparse_ps", "dense_native", "sparcml"):
                run_plan(ctx, c, s, dt, np.int64 if dt != "f16" else np.int32)


def empty_full_and_zero_size(ctx):
    n = ctx.n
    with world(ctx) as c:
        for kinds in (["mixed"] + ["empty"] * (n - 1), ["empty"] * n, ["full"] * n,
                      ["full" if r % 2 else "empty" for r in range(n)]):
            for s in ("balanced", "allgather", "omnireduce", "dense"):
                run_plan(ctx, c, s, "f32", np.int64, kinds=kinds)
        # N = 0: an empty tensor
        with zen.SparseAllreduce(c, 0, 1, "f32", "balanced") as p:
            out = p.dense(np.zeros(0, np.int64), np.zeros(0, np.float32))
            assert out.size == 0
            i, v = p.sparse(np.zeros(0, np.int64), np.zeros(0, np.float32))
            assert i.size == 0 and v.size == 0


def torch_tensors_in_and_out(ctx):
    try:
        import torch
    except ImportError:
        raise Skip("torch is not importable")
    dense, present = reference(ctx.n)
    idx, vals = rank_input(ctx.rank)
    with world(ctx) as c:
        for dt, tdt in (("f32", torch.float32), ("f64", torch.float64), ("f16", torch.float16), ("bf16", torch.bfloat16)):
            with zen.SparseAllreduce(c, R * D, D, tdt, "balanced") as p:
                ti, tv = torch.from_numpy(idx), torch.from_numpy(vals).to(tdt).view(-1, D)
                i, v = p.sparse(ti, tv)
                assert isinstance(i, torch.Tensor) and i.dtype == torch.int64 and v.dtype == tdt and v.shape[1] == D
                check_sparse_result(i.numpy(), v.float().numpy(), dense, present, D, "f64", f"torch {dt}")
                out = torch.full((R * D,), 7.0, dtype=tdt)
                ptr = out.data_ptr()
                got = p.dense(ti.to(torch.int32), tv, out=out)
                assert got is out and out.data_ptr() == ptr, "dense(out=...) writes into the caller's tensor"
                assert np.array_equal(out.double().numpy(), dense), f"torch {dt} dense"
                # A non-contiguous input view is read correctly (copied first).
                tv2 = torch.from_numpy(np.repeat(vals.reshape(-1, D), 2, axis=1)).to(tdt)[:, ::2]
                assert not tv2.is_contiguous()
                got2 = p.dense(ti, tv2)
                assert np.array_equal(got2.double().numpy(), dense)


def inputs_reach_c_without_copies(ctx):
    """Contiguous NumPy arrays and CPU tensors reach the C calls as the caller's own buffers: the
    addresses passed for indices, values and out are the arrays' own (recorded at the ctypes call),
    for sparse, dense and both non-blocking starts; a non-contiguous input is the one copy made."""
    lib = zen.lib()
    seen = []
    plain = lib.call

    def record(name, *args):
        if name.startswith("zenSparseAllreduce") and name[len("zenSparseAllreduce"):] in (
                "Sparse", "Dense", "SparseStart", "DenseStart"):
            seen.append((name, args[2], args[4], args[5] if "Dense" in name else None))
        return plain(name, *args)

    idx, vals = rank_input(ctx.rank)
    dense, present = reference(ctx.n)
    inputs = [("numpy", idx, vals.astype(np.float32), np.zeros(R * D, np.float32), lambda a: a.ctypes.data)]
    try:
        import torch
        inputs.append(("torch", torch.from_numpy(idx.astype(np.int32)), torch.from_numpy(vals).float().view(-1, D),
                       torch.zeros(R * D), lambda a: a.data_ptr()))
    except ImportError:
        pass  # the NumPy half still runs; torch_tensors_in_and_out says torch is absent
    with world(ctx) as c, zen.SparseAllreduce(c, R * D, D, "f32", "balanced") as p:
        lib.call = record
        try:
            for what, i, v, out, addr in inputs:
                del seen[:]
                got_i, got_v = p.sparse(i, v)
                check_sparse_result(got_i, got_v, dense, present, D, "f32", f"{what} sparse")
                assert p.dense(i, v, out=out) is out
                assert np.array_equal(np.asarray(out, np.float64), dense), f"{what} dense"
                got_i, got_v = p.start(i, v).wait()
                check_sparse_result(got_i, got_v, dense, present, D, "f32", f"{what} sparse start")
                assert p.start(i, v, out=out).wait() is out
                names = [s[0] for s in seen]
                assert names == ["zenSparseAllreduceSparse", "zenSparseAllreduceDense", "zenSparseAllreduceSparseStart",
                                 "zenSparseAllreduceDenseStart"], f"{what}: calls {names}"
                for name, ip, vp, op in seen:
                    assert ip == addr(i) and vp == addr(v), \
                        f"{what} {name}: C got indices at {ip:#x} and values at {vp:#x}, the caller's are at " \
                        f"{addr(i):#x} and {addr(v):#x} (a copy was made)"
                    assert op is None or op == addr(out), f"{what} {name}: out reached C at {op:#x}, not {addr(out):#x}"
            # The one copy: a strided view is made contiguous before the call (and still summed right).
            del seen[:]
            wide = np.repeat(vals.astype(np.float32).reshape(-1, D), 2, axis=1)[:, ::2]
            assert not wide.flags.c_contiguous
            got = p.dense(idx, wide)
            assert np.array_equal(got.astype(np.float64), dense), "strided values"
            assert seen[0][2] != wide.ctypes.data, "a strided view cannot reach C as it is"
        finally:
            lib.call = plain


def every_option(ctx):
    n = ctx.n
    idx, vals = rank_input(ctx.rank)
    dense, present = reference(n)
    with world(ctx) as c:
        # average: sum / n rounded once (exact here: n is 1..4 -> values / n checked in float64 of f64)
        with zen.SparseAllreduce(c, R * D, D, "f64", "balanced", average=True) as p:
            assert np.array_equal(p.dense(idx, vals), dense / n)
        # accumulate: added into `out` on the support rows only
        with zen.SparseAllreduce(c, R * D, D, "f32", "allgather", accumulate=True) as p:
            out = np.ones(R * D, np.float32)
            p.dense(idx, vals.astype(np.float32), out=out)
            want = np.where(np.repeat(present, D), 1 + dense, 1)
            assert np.array_equal(out, want), "accumulate"
        # pull / push encodings, visible in the report
        for enc, name in (("coo", "coo"), ("bitmap", "bitmap"), ("ef", "ef")):
            rep = run_plan(ctx, c, "balanced", pull=enc, push=enc)
            if n > 1:
                assert rep.encoding == name, f"pull {enc}: report says {rep.encoding}"
                assert rep.push_encoding in (name, ""), f"push {enc}: report says {rep.push_encoding}"
        # the remaining fields: every one accepted and the sums still exact
        run_plan(ctx, c, "balanced", seed=12345, threads=2, hash_functions=2, parallel_factor=3.0,
                 serial_fraction=0.2, validate=False)
        run_plan(ctx, c, "sparcml", sparcml_dense_switch=0.01)
        run_plan(ctx, c, "omnireduce", block_size=7)
        run_plan(ctx, c, "balanced", device_max_nnz=5, device_recv_capacity=100, device_pull_rows=50)
        rep = run_plan(ctx, c, "auto", auto_candidates=["allgather", "balanced"], auto_reevaluate_every=0,
                       auto_drift=0.5, auto_explore_within=1.0, auto_max_explore=1, auto_trials=1,
                       auto_sample_rows=64, auto_alpha_s=1e-5, auto_message_s=1e-6, auto_bytes_per_s=1e9,
                       auto_entry_s=1e-9)
        assert rep.scheme in ("allgather", "balanced") and rep.decision, f"auto: {rep.scheme!r} {rep.decision!r}"
        # the auto fields appended later (explore budget and share, cold calls, cores, the link check)
        rep = run_plan(ctx, c, "auto", auto_explore_budget=2.0, auto_explore_share=0.2, auto_cold_calls=4.0,
                       auto_cores=1, auto_learn_link=0.0, auto_explore_within=1.0)
        if n > 1:
            assert f"shared cores: {n} ranks per core" in rep.decision, rep.decision
        rep = run_plan(ctx, c, "auto", auto_candidates="allgather", auto_trials=1)
        assert rep.scheme == "allgather", rep.scheme
        # auto_cache (appended later), a path: a second plan takes the first one's remembered choice
        cache = os.path.join("/tmp", f"zen-py-auto-cache-{MPI.COMM_WORLD.bcast(os.getpid(), root=0)}")
        if ctx.rank == 0 and os.path.exists(cache):
            os.remove(cache)
        MPI.COMM_WORLD.Barrier()
        ci, cv = rank_input(ctx.rank)
        cdense, _ = reference(n)
        why = []
        for plan in range(2):
            with zen.SparseAllreduce(c, R * D, D, "f32", "auto", auto_cache=pathlib.Path(cache), auto_explore_within=1.0,
                                     auto_candidates=["allgather", "balanced"]) as p:
                for call in range(3):
                    assert np.array_equal(p.dense(ci, cv.astype(np.float32)), cdense.astype(np.float32)), "auto_cache"
                    if (plan, call) in ((0, 2), (1, 0)):
                        why.append(p.report().decision)
        assert "; remembered in " + cache in why[0], why[0]
        assert "(first call): remembered in " + cache in why[1], why[1]
        MPI.COMM_WORLD.Barrier()
        if ctx.rank == 0:
            os.remove(cache)
        ctx.record("auto scheme", rep.scheme)
        # hierarchical: node size, inter scheme, and caller-made node communicators from MPI splits
        if n % 2 == 0:
            run_plan(ctx, c, "hierarchical", node_size=2, inter_scheme="allgather")
        local = MPI.COMM_WORLD.Split(ctx.rank // 2, ctx.rank)
        across = MPI.COMM_WORLD.Split(local.Get_rank(), ctx.rank)
        if n % 2 == 0 or n == 1:
            with zen.Communicator.from_mpi(local, timeout=ctx.timeout) as ci, \
                    zen.Communicator.from_mpi(across, timeout=ctx.timeout) as ce:
                run_plan(ctx, c, "hier_sparse_ps", intra=ci, inter=ce)
        local.Free()
        across.Free()
        # duplicates rejected on request: the rank with a duplicate fails, its peers are told
        try:
            run_plan(ctx, c, "balanced", reject_duplicates=True)
            raise AssertionError("reject_duplicates accepted a duplicate index")
        except zen.InvalidArgumentError as e:
            assert "duplicate index 0" in str(e), str(e)
        except zen.RemoteError as e:
            assert "duplicate" in str(e), str(e)
    with world(ctx) as c:  # an accumulating plan needs `out` (every rank errs alike)
        with zen.SparseAllreduce(c, R * D, D, "f32", "allgather", accumulate=True) as p:
            ctx.barrier()  # every rank done with the creation before anyone errs
            try:
                p.dense(idx, vals.astype(np.float32))
                raise AssertionError("an accumulating plan without out must fail")
            except zen.InvalidUsageError as e:
                assert "pass it" in str(e)


def unknown_option_and_bad_values(ctx):
    with world(ctx) as c:
        try:
            zen.SparseAllreduce(c, R * D, D, "f32", "balanced", hash_fns=3)
            raise AssertionError("unknown option accepted")
        except zen.InvalidArgumentError as e:
            assert "unknown option 'hash_fns'" in str(e) and "hash_functions" in str(e), str(e)
        assert c.failed, "a Python-side argument error poisons the communicator"
    with world(ctx) as c:
        p = zen.SparseAllreduce(c, R * D, D, "f32", "balanced")
        idx, vals = rank_input(ctx.rank)
        ctx.barrier()  # every rank done with the creation before anyone errs
        try:
            p.dense(idx, vals.astype(np.float64))
            raise AssertionError("f64 values accepted by an f32 plan")
        except zen.InvalidArgumentError as e:
            assert "plan's dtype is f32" in str(e), str(e)
        try:
            p.dense(idx, vals.astype(np.float32))
            raise AssertionError("a poisoned communicator accepted a call")
        except zen.InvalidUsageError as e:  # poisoned by the first error
            assert "refuses further use" in str(e), str(e)


def nonblocking(ctx):
    idx, vals = rank_input(ctx.rank)
    dense, present = reference(ctx.n)
    with world(ctx) as c:
        p = zen.SparseAllreduce(c, R * D, D, "f32", "balanced")
        qs = p.start(idx, vals.astype(np.float32))
        out = np.zeros(R * D, np.float32)
        qd = p.start(idx.astype(np.int32), vals.astype(np.float32), out=out)
        try:
            p.report()
            raise AssertionError("report() while pending")
        except zen.InvalidUsageError:
            pass
        s = 0.0
        for k in range(1, 20000):  # the caller computes meanwhile
            s += k ** 0.5
        polls = 0
        while not qd.test():
            polls += 1
        assert qd.done and qd.result is out and np.array_equal(out, dense)
        i, v = qs.wait()
        check_sparse_result(i, v, dense, present, D, "f32", "start sparse")
        assert qs.wait() is qs.result  # completing twice returns the result again
        q3 = p.start(idx, vals.astype(np.float32), dense=True)
        assert np.array_equal(q3.wait(), dense)
        assert p.report().scheme == "balanced"
        # start() returns before the call completes: rank 0 joins late, the others' start() is back
        # at once and test() says the call is still running until rank 0 has joined.
        if ctx.n > 1:
            late = 0.6
            ctx.barrier()
            if ctx.rank == 0:
                time.sleep(late)
            t0 = time.perf_counter()
            q = p.start(idx, vals.astype(np.float32), dense=True)
            back, running = time.perf_counter() - t0, not q.test()
            got = q.wait()
            if ctx.rank != 0:
                assert back < late / 3 and running, f"start() took {back:.3f} s, running afterwards: {running}"
            assert np.array_equal(got, dense)
        p.close()


def split_subcommunicator(ctx):
    sub = MPI.COMM_WORLD.Split(ctx.rank % 2, ctx.rank)
    members = [r for r in range(ctx.n) if r % 2 == ctx.rank % 2]
    with zen.Communicator.from_mpi(sub, timeout=ctx.timeout) as c:
        assert c.size == len(members) and c.rank == members.index(ctx.rank)
        dense = np.zeros(R * D)
        for r in members:
            i, v = rank_input(r)
            for k, row in enumerate(i):
                dense[row * D:(row + 1) * D] += v[k * D:(k + 1) * D]
        idx, vals = rank_input(ctx.rank)
        with zen.SparseAllreduce(c, R * D, D, "f32", "balanced") as p:
            assert np.array_equal(p.dense(idx, vals.astype(np.float32)), dense)
        x = np.full(3, ctx.rank, np.float64)
        c.allreduce(x)
        assert np.all(x == sum(members))
    sub.Free()


def report_fields(ctx):
    with world(ctx) as c:
        rep = run_plan(ctx, c, "balanced")
        assert rep.scheme == "balanced" and rep.decision == "" and rep.phases
        assert sum(ph.sent for ph in rep.phases) == rep.sent and sum(ph.recv for ph in rep.phases) == rep.recv
        assert all(ph.name and ph.seconds >= 0 for ph in rep.phases)
        if ctx.n > 1:
            assert rep.sent > 0 and rep.bound_bytes > 0 and rep.bound_eff == rep.sent / rep.bound_bytes
            assert rep.bound_eff >= 1.0, "nothing sends less than the information bound"
        d = rep.as_dict()
        assert d["scheme"] == "balanced" and len(d["phases"]) == len(rep.phases)
        rep = run_plan(ctx, c, "allgather")
        assert rep.bound_eff is None and rep.scheme == "allgather"
        rep = run_plan(ctx, c, "auto", auto_trials=1)
        assert rep.decision, rep.decision
        ctx.record("auto scheme", rep.scheme)
        sent, recv = c.traffic()
        assert ctx.n == 1 or (sent > 0 and recv > 0)


def communicator_collectives(ctx):
    n, r = ctx.n, ctx.rank
    with world(ctx) as c:
        for dt, npdt in (("f32", np.float32), ("f64", np.float64), ("f16", np.float16)):
            for op, f in (("sum", sum), ("max", max), ("min", min)):
                x = np.array([(i * 5 + r * 3) % 11 - 5 for i in range(37)], npdt)
                c.allreduce(x, op)
                want = [f((i * 5 + q * 3) % 11 - 5 for q in range(n)) for i in range(37)]
                assert np.array_equal(x.astype(np.float64), np.array(want, np.float64)), f"allreduce {dt} {op}"
        try:
            import torch
            t = torch.arange(37, dtype=torch.bfloat16) + r
            c.allreduce(t)
            assert torch.equal(t.double(), torch.arange(37, dtype=torch.float64) * n + n * (n - 1) / 2), "bf16 allreduce"
        except ImportError:
            pass
        for root in range(n):
            b = np.full(13, r, np.int32)
            c.broadcast(b, root)
            assert np.all(b == root)
        g = c.allgather(np.array([r, 10 * r], np.int64))
        assert np.array_equal(g, np.array([[q, 10 * q] for q in range(n)]))
        # alltoallv: (r + p) % 3 int16 values of 16r + p to rank p
        sb = [2 * ((r + p) % 3) for p in range(n)]
        send = np.concatenate([np.full((r + p) % 3, 16 * r + p, np.int16) for p in range(n)] + [np.zeros(0, np.int16)])
        rb = [2 * ((p + r) % 3) for p in range(n)]
        recv = np.zeros(sum(rb) // 2, np.int16)
        c.alltoallv(send, sb, recv, rb)
        want = np.concatenate([np.full((p + r) % 3, 16 * p + r, np.int16) for p in range(n)] + [np.zeros(0, np.int16)])
        assert np.array_equal(recv, want), f"alltoallv {recv} {want}"
        c.barrier()
        if n > 1:
            c.send(np.array([1000 + r], np.int64), (r + 1) % n, tag=3)
            got = c.recv(np.zeros(1, np.int64), (r - 1) % n, tag=3)
            assert got[0] == 1000 + (r - 1) % n
        ctx.barrier()  # every rank done before the error below poisons the communicator
        try:
            c.allreduce(np.zeros(3, np.int32))
            raise AssertionError("int32 allreduce accepted")
        except zen.InvalidArgumentError as e:
            assert "int32" in str(e)
        assert c.failed


def loopback_threads(ctx):
    n = 3
    comms = zen.Communicator.loopback(n, timeout=ctx.timeout)
    errors, outs = [None] * n, [None] * n
    dense, present = reference(n)

    def body(r):
        try:
            idx, vals = rank_input(r)
            with zen.SparseAllreduce(comms[r], R * D, D, "f64", "balanced") as p:
                outs[r] = p.dense(idx, vals)
            x = np.full(4, float(r))
            comms[r].allreduce(x)
            assert np.all(x == 3.0)
        except Exception as e:  # noqa: BLE001 - reported below
            errors[r] = e
    th = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    [t.start() for t in th]
    [t.join() for t in th]
    assert not any(errors), errors
    assert all(np.array_equal(o, dense) for o in outs)
    for cm in comms:
        cm.close()


def errors_per_result(ctx):
    n, r = ctx.n, ctx.rank
    # zenInvalidArgument on the rank with a bad index; zenRemoteError naming it everywhere else; at once.
    with world(ctx) as c:
        p = zen.SparseAllreduce(c, R * D, D, "f32", "balanced")
        # Every rank has finished creating the plan before rank 0 fails (an MPI barrier, outside zen):
        # otherwise rank 0's abort can reach a peer still inside the creation's exchange, which then
        # rightly raises the RemoteError there rather than in dense().
        ctx.barrier()
        idx, vals = rank_input(r)
        if r == 0:
            idx = idx.copy()
            idx[1] = R + 5
        t0 = time.perf_counter()
        try:
            p.dense(idx, vals.astype(np.float32))
            raise AssertionError("a bad index was accepted")
        except zen.InvalidArgumentError as e:
            assert r == 0 and f"index {R + 5}" in str(e) and "rank 0" in str(e), str(e)
            assert e.code == 1 and e.result == "zenInvalidArgument" and isinstance(e, ValueError)
        except zen.RemoteError as e:
            assert r != 0 and "rank 0" in str(e) and f"index {R + 5}" in str(e), str(e)
            assert e.code == 6
        dt = time.perf_counter() - t0
        assert dt < ctx.timeout / 2, f"the error took {dt:.1f} s to arrive (timeout {ctx.timeout} s): a wait, not a push"
        # zenInvalidUsage: the poisoned communicator refuses every later call.
        try:
            c.barrier()
            raise AssertionError("a poisoned communicator accepted a barrier")
        except zen.InvalidUsageError as e:
            assert "refuses further use" in str(e) and e.code == 2
    # zenInvalidUsage: ranks disagree on the plan's shape.
    if n > 1:
        with world(ctx) as c:
            try:
                zen.SparseAllreduce(c, 100 if r == 0 else 200, 1, "f32", "balanced")
                raise AssertionError("mismatched shapes accepted")
            except (zen.InvalidUsageError, zen.RemoteError) as e:
                assert "N=100" in str(e) and "N=200" in str(e), str(e)
    # zenTimeout: the last rank skips a barrier; the others name it.
    if n > 1:
        with world(ctx, timeout=1.0) as c:
            if r != n - 1:
                t0 = time.perf_counter()
                try:
                    c.barrier()
                    raise AssertionError("a barrier without rank n-1 completed")
                except zen.TimeoutError as e:
                    assert isinstance(e, TimeoutError) and e.code == 5
                    assert f"rank(s) {n - 1}" in str(e) or f"peer {n - 1}" in str(e), str(e)
                assert time.perf_counter() - t0 < 10
            ctx.barrier()
    # zenUnsupported: a tensor on a device this build does not take.
    try:
        import torch
        with world(ctx) as c:
            try:
                c.allreduce(torch.empty(4, device="meta"))
                raise AssertionError("a meta tensor was accepted")
            except zen.UnsupportedError as e:
                assert e.code == 8 and "meta" in str(e)
    except ImportError:
        pass
    # Every code maps to its class and carries the thread's last message (SystemError, InternalError
    # and CudaError cannot be provoked on a CPU build: the mapping itself is checked).
    for code, cls in ((1, zen.InvalidArgumentError), (2, zen.InvalidUsageError), (3, zen.SystemFailureError),
                      (4, zen.InternalError), (5, zen.TimeoutError), (6, zen.RemoteError), (7, zen.CudaError),
                      (8, zen.UnsupportedError)):
        try:
            zen.lib().check(code, "zenTest")
            raise AssertionError(f"code {code} raised nothing")
        except cls as e:
            assert e.code == code and e.call == "zenTest" and isinstance(e, zen.Error)
            assert zen.lib().dll.zenGetErrorString(code).decode() != "unknown"


def one_rank_error_reaches_every_rank(ctx):
    """Rank n-1 alone passes a wrong option while the others create the plan: every rank's call
    raises (the others RemoteError naming rank n-1) well before the timeout."""
    if ctx.n == 1:
        raise Skip("needs two ranks")
    with world(ctx) as c:
        t0 = time.perf_counter()
        try:
            opts = {"hash_functions": 0} if ctx.rank == ctx.n - 1 else {}
            zen.SparseAllreduce(c, R * D, D, "f32", "balanced", **opts)
            raise AssertionError("creation succeeded")
        except zen.InvalidArgumentError as e:
            assert ctx.rank == ctx.n - 1 and "hash_functions" in str(e)
        except zen.RemoteError as e:
            assert ctx.rank != ctx.n - 1 and f"rank {ctx.n - 1}" in str(e) and "hash_functions" in str(e), str(e)
        assert time.perf_counter() - t0 < ctx.timeout / 2
    # The same for an error found in Python (values of the wrong size) during a non-blocking call.
    with world(ctx) as c:
        p = zen.SparseAllreduce(c, R * D, D, "f32", "balanced")
        idx, vals = rank_input(ctx.rank)
        vals = vals.astype(np.float32)
        ctx.barrier()  # every rank done with the creation before rank 0 errs
        t0 = time.perf_counter()
        try:
            if ctx.rank == 0:
                p.start(idx, vals[:-1]).wait()
            else:
                p.start(idx, vals).wait()
            raise AssertionError("completed")
        except zen.InvalidArgumentError as e:
            assert ctx.rank == 0 and "need" in str(e)
        except zen.RemoteError as e:
            assert ctx.rank != 0 and "rank 0" in str(e), str(e)
        assert time.perf_counter() - t0 < ctx.timeout / 2


def lifetime_and_library_search(ctx):
    with world(ctx) as c:
        p = zen.SparseAllreduce(c, 10, 1, "f32", "allgather")
    try:
        p.dense(np.zeros(0, np.int64), np.zeros(0, np.float32))
        raise AssertionError("a plan of a closed communicator worked")
    except zen.InvalidUsageError as e:
        assert "closed" in str(e)
    if ctx.rank == 0:
        env = dict(os.environ, ZEN_LIBRARY="/nonexistent/libzen.so")
        pr = subprocess.run([sys.executable, "-c", "import zen"], env=env, capture_output=True, text=True)
        assert pr.returncode != 0 and "LibraryNotFoundError" in pr.stderr and \
            "ZEN_LIBRARY: /nonexistent/libzen.so (absent)" in pr.stderr, pr.stderr[-2000:]


CHECKS = [(f.__name__, f) for f in (
    version, every_scheme_both_index_widths, every_dtype, empty_full_and_zero_size, torch_tensors_in_and_out,
    inputs_reach_c_without_copies,
    every_option, unknown_option_and_bad_values, nonblocking, split_subcommunicator, report_fields,
    communicator_collectives, loopback_threads, errors_per_result, one_rank_error_reaches_every_rank,
    lifetime_and_library_search)]
