#!/usr/bin/python3
"""Data-parallel word2vec (skip-gram with negative sampling) with plain torch DDP on MPI ranks: the
model, data and data order of examples/train_embedding.cpp (the Brown corpus from
scripts/fetch_corpus.sh, its vocabulary sorted by frequency, batches drawn by splitmix64 from
(seed, step, rank)), so the two examples print the same losses.

A DDP script written for Gloo; zen is one backend string away:

    mpirun -np 4 /usr/bin/python3 examples/python/ddp_embedding.py --backend zen --scheme balanced
    mpirun -np 4 /usr/bin/python3 examples/python/ddp_embedding.py --backend gloo

--compare runs several variants in one job, interleaved over --repeat repetitions, and prints one
table (tokens/s, time in gradient sync per step as DDP itself measures it, final loss, the final
weights against the first variant's):

    mpirun -np 4 /usr/bin/python3 examples/python/ddp_embedding.py \\
        --compare gloo,gloo-dense,zen:balanced,zen:allgather,zen:auto --steps 60 --repeat 3 --out bench-out/ddp

Variants: gloo (DDP on a Gloo group, sparse embedding gradients: Gloo's allgather), gloo-dense
(Embedding(sparse=False): dense gradients, Gloo's allreduce), zen:<scheme> (DDP on a zen group).
Writes ddp_embedding.csv and ddp_embedding.png (loss against wall time) into --out.
"""
import argparse
import cProfile
import hashlib
import math
import os
import pstats
import re
import shutil
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
if os.path.isdir(os.path.join(REPO, "build", "python", "zen")) and "zen" not in sys.modules:
    sys.path.append(os.path.join(REPO, "build", "python"))  # the build tree, when not installed
import zen.torch  # noqa: E402  registers backend "zen" and init_method "mpi://"
from mpi4py import MPI  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Corpus: zen::trace::load_corpus (src/trace/corpus.cpp) in Python, byte for byte: one sentence per
# line; tokens are runs of ASCII letters/digits or bytes >= 0x80 (lower-cased ASCII), with inner
# apostrophes and hyphens, or any other single non-space byte; vocabulary by count, ties by bytes.

_TOKEN = re.compile(rb"[A-Za-z0-9\x80-\xff]+(?:['\-][A-Za-z0-9\x80-\xff]+)*|[^\x00-\x20]")


class Corpus:
    def __init__(self, path, max_vocab=0):
        with open(path, "rb") as f:
            sents = [toks for toks in (_TOKEN.findall(line.lower()) for line in f) if toks]
        if not sents:
            raise SystemExit(f"{path}: no tokens")
        counts = Counter(w for s in sents for w in s)
        words = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        cap = 0 < max_vocab < len(words)
        kept = max_vocab - 1 if cap else len(words)
        ids = {w: i for i, (w, _) in enumerate(words[:kept])}
        self.freq = [c for _, c in words[:kept]]
        if cap:
            self.freq.append(sum(c for _, c in words[kept:]))
        unk = len(self.freq) - 1
        self.vocab = len(self.freq)
        long_ = [s for s in sents if len(s) >= 2]
        if not long_:
            raise SystemExit(f"{path}: no sentence of two words or more")
        self.lengths = np.array([len(s) for s in long_], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.tokens = np.array([ids.get(w, unk) for s in long_ for w in s], dtype=np.int64)
        acc, cdf = 0.0, []
        for c in self.freq:  # word2vec's unigram^0.75, summed in order as the C++ does
            acc += math.pow(float(c), 0.75)
            cdf.append(acc)
        self.neg_cdf = np.array(cdf, dtype=np.float64) / acc


# splitmix64 draws k = 1, 2, ... of a generator seeded with s: z = mix(s + k * gamma).
_GAMMA, _M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


def _draws(seed, count):
    z = np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64) * _GAMMA
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def make_batch(c, a, step, rank):
    """Rank `rank`'s batch of step `step` (train_embedding.cpp's make_batch): centers, contexts,
    negatives as int64 tensors."""
    B, K = a.batch, a.negatives
    seed = ((a.seed * 0x100000001B3) ^ (step << 20) ^ (rank * 0x9E3779B97F4A7C15)) & _MASK
    z = _draws(seed, B * (4 + K)).reshape(B, 4 + K)
    s = (z[:, 0] % np.uint64(len(c.lengths))).astype(np.int64)
    ln = c.lengths[s]
    i = (z[:, 1] % ln.astype(np.uint64)).astype(np.int64)
    off = 1 + (z[:, 2] % np.uint64(a.window)).astype(np.int64)
    j = np.where((z[:, 3] & np.uint64(1)) != 0, i + off, i - off)
    alt = np.where(i + off < ln, i + off, np.where(i - off >= 0, i - off, (i + 1) % ln))
    j = np.where((j < 0) | (j >= ln), alt, j)
    j = np.where(j == i, (i + 1) % ln, j)
    u = (z[:, 4:] >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    neg = np.minimum(np.searchsorted(c.neg_cdf, u, side="right"), c.vocab - 1)
    base = c.starts[s]
    return (torch.from_numpy(c.tokens[base + i]), torch.from_numpy(c.tokens[base + j]),
            torch.from_numpy(neg.astype(np.int64)))


class SkipGram(nn.Module):
    """Two V x D embedding tables (word2vec's initialization), one loss per center word."""

    def __init__(self, vocab, dim, sparse=True):
        super().__init__()
        self.inp = nn.Embedding(vocab, dim, sparse=sparse)
        self.out = nn.Embedding(vocab, dim, sparse=sparse)
        with torch.no_grad():
            self.inp.weight.uniform_(-0.5 / dim, 0.5 / dim)
            self.out.weight.zero_()

    def forward(self, c, o, n):
        vc = self.inp(c)                                                     # (B, D)
        pos = (vc * self.out(o)).sum(1)                                      # (B)
        negs = torch.bmm(self.out(n), vc.unsqueeze(2)).squeeze(2)            # (B, K)
        return -(F.logsigmoid(pos) + F.logsigmoid(-negs).sum(1))


# ---------------------------------------------------------------------------------------------
# Training


def _max(x):
    return MPI.COMM_WORLD.allreduce(x, op=MPI.MAX)


def _sum(x):
    return MPI.COMM_WORLD.allreduce(x, op=MPI.SUM)


class Outcome:
    def __init__(self, variant):
        self.variant = variant
        self.curve = []  # (step, time_s, loss, tokens_per_s, sync_ms, sync_share)
        self.params = []
        self.tokens_per_s = self.sync_ms = self.sync_share = self.final_loss = 0.0
        self.ranks_agree = True
        self.zen_ms = None  # zen groups: ms per steady step in (agreement, zen's call, the rest of the op)


def train(c, a, variant, group, log=print):
    """Train a fresh model (seed a.seed) for a.steps steps with DDP over `group`; per-interval and
    steady-state figures (steps after a.warmup) of the slowest rank."""
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    model = SkipGram(c.vocab, a.dim, sparse=not variant.endswith("-dense"))
    ddp = nn.parallel.DistributedDataParallel(model, process_group=group)
    ddp._set_ddp_runtime_logging_sample_rate(1)  # DDP times its gradient sync on every step
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    else:
        opt = torch.optim.Adagrad(model.parameters(), lr=a.lr)
    o = Outcome(variant)
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    zst = zen.torch.stats(pg) if isinstance(pg, zen.torch.ProcessGroupZen) else None
    z0 = None
    t_step = t_sync = loss_acc = 0.0
    steady_step = steady_sync = 0.0
    steady_n = in_iv = 0
    t_start = time.perf_counter()
    for t in range(a.steps):
        cen, ctx, neg = make_batch(c, a, t, rank)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        losses = ddp(cen, ctx, neg)
        losses.sum().backward()  # DDP synchronizes the gradients inside
        opt.step()
        t1 = time.perf_counter()
        sync = ddp._get_ddp_logging_data().get("backward_comm_time", 0) * 1e-9
        loss_acc += float(losses.mean())
        t_step += t1 - t0
        t_sync += sync
        if t + 1 == a.warmup and zst is not None:
            z0 = (zst.agree_seconds, zst.zen_seconds, zst.sparse_seconds)
        if t >= a.warmup:
            steady_step += t1 - t0
            steady_sync += sync
            steady_n += 1
        in_iv += 1
        if in_iv == a.interval or t + 1 == a.steps:
            step_s, sync_s = _max(t_step), _max(t_sync)
            iv = (t + 1, time.perf_counter() - t_start, _sum(loss_acc) / n / in_iv, a.batch * n * in_iv / step_s,
                  1e3 * sync_s / in_iv, sync_s / step_s)
            o.curve.append(iv)
            log(f"{variant:<14} step {iv[0]:5d}  loss {iv[2]:.5f}  tokens/s {iv[3]:10.0f}  sync {iv[4]:8.3f} ms/step "
                f"({100 * iv[5]:4.1f}% of the step)")
            t_step = t_sync = loss_acc = 0.0
            in_iv = 0
    steady_step, steady_sync = _max(steady_step), _max(steady_sync)
    if steady_n:
        o.tokens_per_s = a.batch * n * steady_n / steady_step
        o.sync_ms = 1e3 * steady_sync / steady_n
        o.sync_share = steady_sync / steady_step
    if zst is not None and steady_n:
        z0 = z0 or (0.0, 0.0, 0.0)
        agree, call, total = (zst.agree_seconds - z0[0], zst.zen_seconds - z0[1], zst.sparse_seconds - z0[2])
        o.zen_ms = tuple(1e3 * _max(x) / steady_n for x in (agree, call, total - agree - call))
    o.final_loss = o.curve[-1][2]
    h = hashlib.sha1()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    hs = MPI.COMM_WORLD.allgather(h.hexdigest())
    o.ranks_agree = len(set(hs)) == 1
    o.params = [p.detach().clone() for p in model.parameters()]
    del ddp
    return o


def max_rel_diff(a, b):
    m = 0.0
    for x, y in zip(a, b):
        scale = max(float(x.abs().max()), 1e-30)
        m = max(m, float((x - y).abs().max()) / scale)
    return m


def write_outputs(out, runs, n):
    os.makedirs(out, exist_ok=True)
    csv = os.path.join(out, "ddp_embedding.csv")
    with open(csv, "w") as f:
        f.write("variant,repetition,step,time_s,loss,tokens_per_s,sync_ms_per_step,sync_share\n")
        for rep, r in runs:
            for iv in r.curve:
                f.write(f"{r.variant},{rep},{iv[0]},{iv[1]:.6f},{iv[2]:.6f},{iv[3]:.1f},{iv[4]:.4f},{iv[5]:.4f}\n")
    gp = shutil.which("gnuplot")
    if not gp:
        print("ddp_embedding: gnuplot not found; PNG skipped (CSV written)", file=sys.stderr)
        return
    variants = list(dict.fromkeys(r.variant for _, r in runs))
    plot = ", ".join(f"'ddp_embedding.csv' using (strcol(1) eq '{v}' && $2 == 0 ? $4 : 1/0):5 with linespoints lw 2 "
                     f"title '{v}'" for v in variants)
    script = ("set terminal pngcairo size 900,540 font 'sans,11'\nset output 'ddp_embedding.png'\n"
              "set datafile separator ','\nset grid\nset key top right\nset xlabel 'wall time (s)'\nset ylabel 'loss'\n"
              f"set title 'word2vec SGNS with torch DDP, {n} ranks: loss vs time per backend'\nplot {plot}\n")
    with open(os.path.join(out, "ddp_embedding.gp"), "w") as f:
        f.write(script)
    if subprocess.run([gp, "ddp_embedding.gp"], cwd=out).returncode != 0:
        print("ddp_embedding: gnuplot failed", file=sys.stderr)


# ---------------------------------------------------------------------------------------------


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--backend", choices=["gloo", "zen"], default="zen", help="torch.distributed backend (default zen)")
    p.add_argument("--scheme", default=None, help="zen scheme (default: ZEN_SCHEME, else auto)")
    p.add_argument("--dense", action="store_true", help="Embedding(sparse=False): dense gradients")
    p.add_argument("--compare", default=None, help="comma-separated variants in one job: gloo, gloo-dense, zen:<scheme>")
    p.add_argument("--repeat", type=int, default=1, help="--compare: interleaved repetitions (median reported)")
    p.add_argument("--corpus", default=os.path.join(REPO, "data", "brown", "brown.txt"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the steady-state figures")
    p.add_argument("--batch", type=int, default=512, help="center words per rank and step")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--negatives", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.025)
    p.add_argument("--optimizer", choices=["sgd", "adagrad"], default="sgd")
    p.add_argument("--max-vocab", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--interval", type=int, default=20, help="steps per printed line")
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (0: cores / ranks on the node)")
    p.add_argument("--out", default=None, help="directory for ddp_embedding.csv and ddp_embedding.png")
    p.add_argument("--check", action="store_true", help="exit 1 unless every variant's weights and losses agree "
                                                        "with the first's and every rank holds the same weights")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--profile", type=int, default=0, metavar="K",
                   help="cProfile every run on rank 0 and print its K most expensive functions (own time)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse(argv)
    w = MPI.COMM_WORLD
    rank, n = w.Get_rank(), w.Get_size()
    local = w.Split_type(MPI.COMM_TYPE_SHARED)
    torch.set_num_threads(a.threads or max(1, (os.cpu_count() or 1) // local.Get_size()))
    local.Free()
    log = print if rank == 0 else (lambda *_: None)
    if not os.path.exists(a.corpus):
        raise SystemExit(f"corpus {a.corpus} not found: run scripts/fetch_corpus.sh (Brown corpus) or pass --corpus")
    c = Corpus(a.corpus, a.max_vocab)
    variants = a.compare.split(",") if a.compare else \
        [("zen:" + (a.scheme or os.environ.get("ZEN_SCHEME", "auto"))) if a.backend == "zen" else "gloo"]
    if a.dense and not a.compare:
        variants = [v + "-dense" if v == "gloo" else v for v in variants]
    log(f"# corpus {a.corpus}: {len(c.lengths)} sentences, vocabulary {c.vocab}; {n} ranks, batch {a.batch} per rank, "
        f"dim {a.dim}, {a.negatives} negatives, {a.optimizer} lr {a.lr}, {a.steps} steps (first {a.warmup} not in "
        "the steady-state figures)")
    # The plain script: one backend, the default group. --compare: a group per backend and scheme.
    first = "zen" if not a.compare and a.backend == "zen" else "gloo"
    dist.init_process_group(first, init_method="mpi://",
                            pg_options=zen.torch.Options(scheme=a.scheme) if first == "zen" else None)
    groups = {}

    def group_of(v):
        if not a.compare:
            return None
        key = "gloo" if v.startswith("gloo") else v
        if key not in groups:
            groups[key] = dist.new_group(backend="gloo") if key == "gloo" else \
                dist.new_group(backend="zen", pg_options=zen.torch.Options(scheme=v.split(":", 1)[1]))
        return groups[key]

    for v in variants:
        if not (v in ("gloo", "gloo-dense") or v.startswith("zen:")):
            raise SystemExit(f"unknown variant {v!r} (gloo, gloo-dense, zen:<scheme>)")
        group_of(v)
    runs = []
    for rep in range(a.repeat):
        order = variants[rep % len(variants):] + variants[:rep % len(variants)] if a.repeat > 1 else variants
        for v in order:
            w.Barrier()
            prof = cProfile.Profile() if a.profile and rank == 0 else None
            if prof:
                prof.enable()
            runs.append((rep, train(c, a, v, group_of(v), log)))
            if prof:
                prof.disable()
                print(f"# cProfile of {v} on rank 0 (repetition {rep}), by own time:")
                pstats.Stats(prof).sort_stats("tottime").print_stats(a.profile)
    bad = 0
    if rank == 0:
        by = {v: [r for _, r in runs if r.variant == v] for v in variants}
        ref = by[variants[0]][-1]
        print(f"\n| variant | tokens/s | sync ms/step | sync share | final loss | max rel. weight diff vs {variants[0]} "
              f"| ranks agree |\n|---|---:|---:|---:|---:|---:|---|")
        for v in variants:
            rs = by[v]
            last = rs[-1]
            diff = max_rel_diff(ref.params, last.params)
            curve = max((abs(x[2] - y[2]) / max(abs(y[2]), 1e-30) for x, y in zip(last.curve, ref.curve)), default=0)
            agree = all(r.ranks_agree for r in rs)
            print(f"| {v} | {np.median([r.tokens_per_s for r in rs]):.0f} | {np.median([r.sync_ms for r in rs]):.3f} | "
                  f"{100 * np.median([r.sync_share for r in rs]):.1f}% | {last.final_loss:.5f} | {diff:.2e} "
                  f"(loss curve {curve:.2e}) | {'yes' if agree else 'NO'} |")
            if a.check and (diff > a.tolerance or curve > a.tolerance or not agree):
                bad += 1
        zen_rows = [v for v in variants if by[v][-1].zen_ms is not None]
        if zen_rows:
            print("\nzen groups, ms per steady step (slowest rank, median over repetitions): agreement record | "
                  "zen sparse allreduce | indices, result tensors, copy into the input")
            for v in zen_rows:
                ms = [np.median([r.zen_ms[i] for r in by[v]]) for i in range(3)]
                print(f"  {v}: {ms[0]:.3f} | {ms[1]:.3f} | {ms[2]:.3f}")
        if a.repeat > 1:
            print(f"(medians over {a.repeat} interleaved repetitions; per repetition tokens/s: " + "; ".join(
                f"{v} " + " ".join(f"{r.tokens_per_s:.0f}" for r in by[v]) for v in variants) + ")")
        if a.out:
            write_outputs(a.out, runs, n)
            print(f"wrote {a.out}/ddp_embedding.csv and ddp_embedding.png")
        if a.check:
            print(f"check: {'FAILED' if bad else 'all variants agree'} (tolerance {a.tolerance})")
    bad = w.bcast(bad, root=0)
    for g in groups.values():
        dist.destroy_process_group(g)
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
