#!/usr/bin/python3
"""Failures that end or break a rank, seen from Python (docs/reliability.md, "Python"): every error
reaches Python as an exception on every rank, with no hang and no abort of the interpreter. One
scenario per mpirun (a killed rank ends the job's MPI use), run by tests/python/faults_test.sh:

    mpirun [--mca orte_enable_recovery 1] -np N /usr/bin/python3 tests/python/faults.py MODE [--victim V]

killed   rank V SIGKILLs itself while every other rank holds 4 requests started with
         SparseAllreduce.start on two plans (timeout 1 s): each survivor's wait() raises a zen.Error
         naming rank V (the first a TimeoutError or RemoteError, the others InvalidUsageError quoting
         it) within 2x the timeout of the kill, a later
         call raises at once, closing the plans and the communicator is bounded. Survivors leave
         with os._exit (MPI_Finalize cannot complete with a dead peer).
oom      rank V lowers RLIMIT_AS to its address space + 16 MB after the setup, then every rank runs a
         large call: V raises zen.SystemFailureError naming the allocation, every peer
         zen.RemoteError naming V; a later call raises on every rank; the caller's dense output is
         untouched; the interpreter goes on (and MPI finalizes normally).
threads  MPI initialized at MPI_THREAD_SERIALIZED (mpi4py.rc.thread_level): two threads drive two
         communicators at once; zen refuses the second with zen.UnsupportedError naming
         MPI_THREAD_MULTIPLE (every rank: the refusal is agreed, the communicator poisoned).
single   rank 1 alone initializes MPI at MPI_THREAD_SINGLE: where torch exists, init_process_group
         raises on every rank (rank 1 UnsupportedError naming MPI_THREAD_SERIALIZED, the others
         RemoteError naming rank 1), and the job ends by itself.

Each surviving rank prints "faults.py: rank R MODE: ok ..." or "... BAD: why"; exit 0 when ok.
"""
import argparse
import os
import signal
import sys
import threading
import time

import numpy as np

MODE = sys.argv[1] if len(sys.argv) > 1 else ""
import mpi4py  # noqa: E402

if MODE == "threads":
    mpi4py.rc.thread_level = "serialized"
elif MODE == "single" and os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMIX_RANK")) == "1":
    mpi4py.rc.thread_level = "single"  # rank 1 only: the others stay at mpi4py's MPI_THREAD_MULTIPLE
from mpi4py import MPI  # noqa: E402

import zen  # noqa: E402

W = MPI.COMM_WORLD
RANK, N = W.Get_rank(), W.Get_size()
bad = []


def expect(cond, what):
    if not cond:
        bad.append(what)


def rank_input(rows, width, seed):
    rng = np.random.default_rng(seed)
    idx = np.unique(np.concatenate([[0, rows - 1], rng.choice(rows, size=min(rows, 64), replace=False)]))
    return idx.astype(np.int64), np.ones(idx.size * width, np.float32)


def killed(victim):
    tmo = 1.0
    c = zen.Communicator.from_mpi(W, timeout=tmo)
    plans = [zen.SparseAllreduce(c, 4096 * 4, 4, "f32", s) for s in ("balanced", "allgather")]
    idx, vals = rank_input(4096, 4, RANK)
    W.Barrier()  # every plan exists on every rank
    if RANK == victim:
        W.Barrier()  # the survivors' requests are pending
        os.kill(os.getpid(), signal.SIGKILL)
    reqs = [p.start(idx, vals) for p in plans for _ in range(2)]
    W.Barrier()
    t_kill = time.monotonic()
    named, failed, last = 0, 0, 0.0
    for q in reqs:
        try:
            q.wait()
            bad.append("a pending request completed")
        except zen.Error as e:  # the first: TimeoutError / RemoteError; later ones InvalidUsageError quoting it
            failed += 1
            last = time.monotonic() - t_kill
            named += f"rank {victim}" in str(e) or f"peer {victim}" in str(e)
    expect(failed == len(reqs), f"{failed} of {len(reqs)} pending requests failed")
    expect(named == failed, f"{named} of {failed} errors name rank {victim}")
    expect(last <= 2 * tmo, f"the last pending request failed {last:.2f} s after the kill (> 2x {tmo} s)")
    t0 = time.monotonic()
    try:
        plans[0].dense(idx, vals)
        bad.append("a later call succeeded")
    except zen.Error:
        pass
    later = time.monotonic() - t0
    expect(later < 0.5, f"a later call took {later:.2f} s to fail")
    t0 = time.monotonic()
    for p in plans:
        p.close()
    c.close()
    close = time.monotonic() - t0
    expect(close < 3, f"closing took {close:.2f} s")
    return (f"{len(reqs)} pending, {failed} failed by {last * 1e3:.0f} ms after the kill, {named} named rank "
            f"{victim}, later call failed in {later * 1e3:.0f} ms, close {close * 1e3:.0f} ms")


def address_space():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def oom(victim):
    import resource
    rows, width = 2_000_000, 4
    c = zen.Communicator.from_mpi(W, timeout=60)
    p = zen.SparseAllreduce(c, rows * width, width, "f32", "balanced")
    small_i, small_v = rank_input(rows, width, RANK)
    ref = p.dense(small_i, small_v)  # setup and a small call succeed
    expect(np.all(ref[small_i[:1] * width] >= 1), "the small call's result")
    idx = np.arange(rows, dtype=np.int64)  # full density: the workspace grows with the call
    vals = np.ones(rows * width, np.float32)
    out = np.full(rows * width, 7.0, np.float32)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    W.Barrier()
    if RANK == victim:
        resource.setrlimit(resource.RLIMIT_AS, (address_space() + (16 << 20), hard))
    err = None
    try:
        p.dense(idx, vals, out=out)
        bad.append("the large call succeeded")
    except zen.Error as e:
        err = e
    if RANK == victim:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        expect(isinstance(err, zen.SystemFailureError) and "allocation" in str(err) and f"rank {victim}" in str(err),
               f"the victim's error: {type(err).__name__}: {err}")
    else:
        expect(isinstance(err, zen.RemoteError) and f"rank {victim}" in str(err),
               f"a peer's error: {type(err).__name__}: {err}")
    expect(bool(np.all(out == 7.0)), "the caller's output was written")
    try:
        p.dense(small_i, small_v)
        bad.append("a later call succeeded")
    except zen.Error:
        pass
    p.close()
    c.close()
    W.Barrier()
    return f"{type(err).__name__}: {str(err)[:160]}"


def threads():
    expect(MPI.Query_thread() == MPI.THREAD_SERIALIZED, f"thread level {MPI.Query_thread()}")
    comms = [W.Dup(), W.Dup()]
    errs, done = [None, None], [0, 0]
    go = threading.Barrier(2)

    def body(k):
        try:
            go.wait()
            with zen.Communicator.from_mpi(comms[k], timeout=20) as c:
                p = zen.SparseAllreduce(c, 1 << 16, 1, "f32", "allgather")
                idx, vals = rank_input(1 << 16, 1, RANK)
                for _ in range(200):
                    p.dense(idx, vals)
                    done[k] += 1
                p.close()
        except zen.Error as e:
            errs[k] = e
    ts = [threading.Thread(target=body, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    expect(not any(t.is_alive() for t in ts), "a thread did not end within 60 s")
    refused = [e for e in errs if isinstance(e, zen.UnsupportedError) and "MPI_THREAD_MULTIPLE" in str(e)]
    other = [e for e in errs if e is not None and e not in refused]
    # Every rank: some rank was refused; each error is the refusal, or a RemoteError that quotes it.
    anyone = W.allreduce(len(refused), op=MPI.SUM)
    expect(anyone > 0, "no rank was refused under MPI_THREAD_SERIALIZED")
    for e in other:
        expect(isinstance(e, (zen.RemoteError, zen.UnsupportedError)), f"unexpected {type(e).__name__}: {e}")
    for c in comms:
        c.Free()
    msg = f"refused {len(refused)}, other errors {len(other)}, calls {done}"
    return msg


def single():
    # The torch backend refuses a group when MPI runs below MPI_THREAD_SERIALIZED (torch calls the
    # group from its autograd thread). Only rank 1 runs at MPI_THREAD_SINGLE: the refusal is agreed,
    # so rank 1 raises UnsupportedError and every other rank RemoteError naming rank 1, all at
    # init_process_group. (A refusal raised on rank 1 alone would leave the others in the group's
    # collective creation; one raised at once on rank 0 could leave a peer in torch's rendezvous.)
    expect((MPI.Query_thread() == MPI.THREAD_SINGLE) == (RANK == 1), f"thread level {MPI.Query_thread()}")
    try:
        import importlib
        import torch.distributed as dist
        importlib.import_module("zen.torch")  # registers the backend (no local name `zen`)
    except ImportError:
        return "torch absent: skipped"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")  # faults_test.sh sets a free one
    try:
        dist.init_process_group("zen", rank=RANK, world_size=N)
        bad.append("init_process_group succeeded with rank 1 at MPI_THREAD_SINGLE")
        return ""
    except Exception as e:  # noqa: BLE001 - torch may wrap the backend's error
        expect("MPI_THREAD_SERIALIZED" in str(e), f"{type(e).__name__}: {e}")
        if RANK == 1:
            expect(isinstance(e, zen.UnsupportedError), f"rank 1: {type(e).__name__}: {e}")
        else:
            expect(isinstance(e, zen.RemoteError) and "rank 1 refused" in str(e), f"{type(e).__name__}: {e}")
        return f"{type(e).__name__}: {str(e)[:120]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["killed", "oom", "threads", "single"])
    ap.add_argument("--victim", type=int, default=1)
    a = ap.parse_args()
    try:
        if a.mode == "killed":
            info = killed(a.victim)
        elif a.mode == "oom":
            info = oom(a.victim)
        elif a.mode == "threads":
            info = threads()
        else:
            info = single()
    except Exception as e:  # noqa: BLE001 - reported, never an interpreter abort
        bad.append(f"uncaught {type(e).__name__}: {e}")
        info = ""
    status = "ok" if not bad else "BAD: " + "; ".join(bad)
    print(f"faults.py: rank {RANK} {a.mode}: {status} {info}", flush=True)
    if a.mode == "killed":
        os._exit(0 if not bad else 1)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
