#!/usr/bin/python3
"""The Python layer's tests, run once per rank count under mpirun (many checks per process: each
start of a Python process with torch costs about a second):

    mpirun -np 4 /usr/bin/python3 tests/python/run_checks.py [--only NAME] [--expect-version V]
           [--train-embedding PATH] [--corpus PATH]

checks_core.py: the C-API mirror (every option, dtype, index width, non-blocking, sub-communicators,
reports, errors per zenResult_t, an error on one rank reaching every rank); checks_torch.py: the
torch.distributed backend (DDP parity with Gloo, dist collectives, sparse cases, plan cache,
mismatches, errors). Torch checks skip, saying so, where torch is absent.

Each check runs on every rank; after it the ranks compare outcomes, so a check that fails on one
rank fails everywhere and the next check starts in step. Exit code: the number of failed checks.
"""
import argparse
import os
import sys
import time
import traceback
import warnings

warnings.filterwarnings("ignore", message=".*all_reduce_coalesced will be deprecated.*")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mpi4py import MPI  # noqa: E402  before zen: MPI_THREAD_MULTIPLE (mpi4py's default)
from checkutil import Skip  # noqa: E402


class Ctx:
    """What every check gets: MPI world, rank, size, arguments, and helpers that cannot desync the
    ranks when a check fails on some of them only: record() keeps values that the harness compares
    across ranks after the check, barrier() gives up after the timeout (on a communicator of the
    check's own, so a barrier left pending cannot match a later one)."""

    def __init__(self, args):
        self.world = MPI.COMM_WORLD
        self.rank = self.world.Get_rank()
        self.n = self.world.Get_size()
        self.args = args
        self.timeout = 20.0  # seconds: every communicator of a check; a hang fails in bounded time
        self.comm = None
        self.records = []

    def record(self, what, value):
        """Compared across ranks when the check ends: every rank must hold an equal value."""
        self.records.append((what, value))

    def barrier(self):
        if not bounded_barrier(self.comm, self.timeout):
            self.comm = None  # leave the pending barrier on its own communicator
            raise TimeoutError(f"rank {self.rank}: a peer did not reach the check's barrier in {self.timeout} s")


def bounded_barrier(comm, seconds):
    """An MPI barrier on `comm` that gives up after `seconds`: True when every rank reached it."""
    req = comm.Ibarrier()
    deadline = time.monotonic() + seconds
    while not req.Test():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


def run(checks, ctx, only):
    results = []
    for name, fn in checks:
        if only and not any(o in name for o in only):
            continue
        ctx.comm = ctx.world.Dup()
        ctx.records = []
        t0 = time.perf_counter()
        status, detail = "PASS", ""
        try:
            fn(ctx)
        except Skip as e:
            status, detail = "SKIP", str(e)
        except Exception:  # noqa: BLE001 - a failed check is reported, the next one runs
            status, detail = "FAIL", traceback.format_exc()
            # At once, on this rank: should a peer still be inside an MPI call without a timeout
            # (MPI_Comm_dup, ...), the cause is on record before ctest's timeout ends the job.
            print(f"rank {ctx.rank}: [FAIL] {name}:\n{detail}", file=sys.stderr, flush=True)
        dt = time.perf_counter() - t0
        if ctx.comm is not None:
            ctx.comm.Free()
        # Every rank leaves the check within a bound: a rank that failed early is out of step with
        # peers still inside the check (possibly in an MPI call without a timeout, MPI_Comm_dup, ...),
        # so the job ends at once with the cause on record instead of waiting out ctest's timeout.
        if not bounded_barrier(ctx.world, 3 * ctx.timeout):
            print(f"rank {ctx.rank}: [FAIL] {name}: the ranks did not all leave the check within "
                  f"{3 * ctx.timeout:.0f} s (this rank: {status}); ending the job", file=sys.stderr, flush=True)
            ctx.world.Abort(1)
        outcomes = ctx.world.allgather((status, detail, ctx.records))
        if status != "FAIL":
            recs = [o[2] for o in outcomes if o[0] != "FAIL"]
            if any(r != recs[0] for r in recs):
                status, detail = "FAIL", f"recorded values differ across ranks: {[o[2] for o in outcomes]}"[:4000]
                outcomes[ctx.rank] = (status, detail, ctx.records)
        if any(s == "FAIL" for s, _, _ in outcomes):
            final = "FAIL"
        elif all(s == "SKIP" for s, _, _ in outcomes):
            final = "SKIP"
        else:
            final = "PASS" if all(s == "PASS" for s, _, _ in outcomes) else "FAIL"
        if ctx.rank == 0:
            print(f"[{final}] {name} ({dt:.2f} s)", flush=True)
            for r, (s, d, _) in enumerate(outcomes):
                if s == "FAIL":
                    print(f"  rank {r}: {d.rstrip()}", flush=True)
            if final == "SKIP":
                print(f"  skipped: {outcomes[0][1]}", flush=True)
        results.append(final)
    return results


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", action="append", default=[], help="run the checks whose name contains this")
    p.add_argument("--expect-version", default=None, help="zen's version (CMake's project version)")
    p.add_argument("--train-embedding", default=None, help="examples' train_embedding binary (C++), for the "
                                                           "data-order check of the Python example")
    p.add_argument("--corpus", default=os.path.join(HERE, "..", "data", "corpus-tiny.txt"))
    args = p.parse_args()
    ctx = Ctx(args)
    import checks_core
    checks = list(checks_core.CHECKS)
    try:
        import torch  # noqa: F401
        import checks_torch
        checks += checks_torch.CHECKS
    except ImportError as e:
        if ctx.rank == 0:
            print(f"[SKIP] torch checks: torch is not importable here ({e})", flush=True)
    t0 = time.perf_counter()
    res = run(checks, ctx, args.only)
    if "checks_torch" in sys.modules:
        sys.modules["checks_torch"].finish(ctx)
    bad = res.count("FAIL")
    if ctx.rank == 0:
        print(f"python checks at n = {ctx.n}: {res.count('PASS')} passed, {bad} failed, {res.count('SKIP')} skipped "
              f"in {time.perf_counter() - t0:.1f} s", flush=True)
    return bad


if __name__ == "__main__":
    sys.exit(main())
