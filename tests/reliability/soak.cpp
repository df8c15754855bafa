// zen_soak: hours of calls without growth (scripts/soak.sh; docs/reliability.md, "Soak"). Under
// mpirun, every rank draws the same seeded random mix per step: a communicator (the world's, or a
// sub-communicator split off MPI_COMM_WORLD and freed after the step), a scheme (every name of
// make_scheme, and hierarchical over the balanced scheme with nodes of 2), sparse or dense output, a
// tensor of 1 KB .. --max-mb MB dense size, dtype f32 / f64 / f16 / bf16, int32 or int64 indices,
// density 0, 100 % or in between (rows 0 and N/D - 1 present in half the steps), and blocking calls
// or 1..3 non-blocking requests waited in a per-rank random order. Plans on the world communicator
// are cached (up to 4) and destroyed at random; every result is checked exactly against a closed
// form (values are small integers, so every sum is exact in every dtype).
//
// Memory in flight is bounded: a step's requests together hold at most --inflight-mb MB of sparse
// input per rank (default half of --max-mb; estimated from rows x density x (index + row) bytes): a draw
// over it has fewer requests, and a single request over it a lower density (its dense size stays).
// Schemes hold a few times their input (allgather: every rank's), so this bounds a rank's peak.
// The first 3 x (schemes) steps are the warm-up: every scheme at the largest size with the largest
// input the bound allows (f16 rows of one, int64 indices: the most rows), one request with sparse
// and one with dense output, then three requests of a third each, so every cache (the allocator's,
// MPI's) reaches the high-water mark of the mix that follows; the warm-up ends --warmup-s seconds
// after them. Every --sample-s seconds (and
// at the end of the warm-up steps) every rank drops its plans, returns free heap to the system
// (malloc_trim) and samples its RSS (VmRSS), the heap in use (bytes allocated and not freed, every
// malloc arena and mmapped chunk: mallinfo2; under ASan its allocator's count), open descriptors
// (/proc/self/fd) and threads; rank 0 writes them to --csv (t_s, calls, bytes, rank, rss_kib, fds,
// threads, heap_kib, free_kib). At the end rank 0 compares each rank's samples after the warm-up with
// its warm-up samples: any descriptor or thread above the warm-up maximum, heap in use more than
// --heap-growth-mib (1 MiB) above it, or RSS more than --rss-growth-mib (16 MiB) above it, is growth
// (RSS is not judged under ASan, whose quarantine keeps freed memory by design). The heap is the
// leak check: RSS also counts free memory the allocator keeps (glibc's per-thread arenas keep tens
// of MiB; scripts/soak.sh runs with MALLOC_ARENA_MAX=1, docs/reliability.md "Soak"). It prints
//   zen_soak: PASS|FAIL calls C (...), bytes B, ..., wrong W, heap growth ..., RSS growth ..., descriptors, threads,
//   peak RSS (each rank's VmHWM: lowest..highest; reported, not judged)
// and exits 1 on growth or a wrong result. A call that fails (or does not finish within the
// communicator timeout, --timeout-s) ends the job (MPI_Abort, exit 2).
#include <CLI/CLI.hpp>
#include <dirent.h>
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's allocator statistics (compiler-rt's sanitizer/allocator_interface.h, which
// GCC does not install; libasan exports them).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
extern "C" size_t __sanitizer_get_free_bytes();
#define ZEN_SOAK_ASAN 1
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "differential.hpp"
#include "zen/comm/mpi.hpp"
#include "zen/schemes/hierarchical.hpp"

namespace {
using namespace zen;
using difftest::splitmix;

// One step's draw (identical on every rank: the generator is seeded with the seed and the step).
struct Draw {
  int comm = 0;  // 0 world, 1 halves (rank % 2), 2 all but the last rank + a singleton
  std::string scheme;
  bool dense_out = false, blocking = true, ends = false;
  int requests = 1;
  DType dtype = DType::F32;
  IndexType itype = IndexType::I64;
  uint32_t width = 1;
  uint64_t rows = 1;
  double density = 0;
  uint64_t threshold = 0;  // row present when hash < threshold (density in [0, 1) only)
};

// Rank r of m holds row x (call c) when its hash falls under the threshold; value of column j:
// 1 + (3x + j + r) mod 7, so a sum over <= 8 ranks is an integer <= 56 (exact in every dtype).
struct Gen {
  const Draw& d;
  uint64_t call;
  bool has(int r, uint64_t x) const {
    if (d.density >= 1) return true;
    if (d.ends && (x == 0 || x + 1 == d.rows)) return true;
    if (d.density <= 0) return false;
    return splitmix(call * 0x100000001b3ULL ^ (static_cast<uint64_t>(r) << 48) ^ x) < d.threshold;
  }
  static double value(int r, uint64_t x, uint32_t j) { return 1 + static_cast<double>((3 * (x % 7) + j + r) % 7); }
};

struct Input {
  std::vector<int64_t> i64;
  std::vector<int32_t> i32;
  std::vector<uint8_t> val;
  SparseView view;
};

Input make_input(const Draw& d, uint64_t call, int r) {
  Input in;
  const Gen g{d, call};
  const size_t es = dtype_size(d.dtype);
  for (uint64_t x = 0; x < d.rows; ++x)
    if (g.has(r, x)) in.i64.push_back(static_cast<int64_t>(x));
  in.val.resize(in.i64.size() * d.width * es);
  dispatch_dtype(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < in.i64.size(); ++k)
      for (uint32_t j = 0; j < d.width; ++j)
        difftest::put_value<T>(&in.val[(k * d.width + j) * es], Gen::value(r, static_cast<uint64_t>(in.i64[k]), j));
  });
  in.view.dense_len = d.rows * d.width;
  in.view.row_width = d.width;
  in.view.nnz = in.i64.size();
  in.view.dtype = d.dtype;
  in.view.values = in.val.data();
  if (d.itype == IndexType::I32) {
    in.i32.assign(in.i64.begin(), in.i64.end());
    in.i64 = {};
    in.view.index_type = IndexType::I32;
    in.view.indices = in.i32.data();
  } else {
    in.view.index_type = IndexType::I64;
    in.view.indices = in.i64.data();
  }
  return in;
}

// Compare a result with the closed form; "" when exact, else the first difference.
std::string check(const Draw& d, uint64_t call, int m, const SparseTensor* sp, const std::vector<uint8_t>* dense) {
  const Gen g{d, call};
  const size_t es = dtype_size(d.dtype);
  size_t k = 0;  // next sparse result row
  std::vector<double> want(d.width);
  char buf[256];
  for (uint64_t x = 0; x < d.rows; ++x) {
    bool any = false;
    std::fill(want.begin(), want.end(), 0.0);
    for (int r = 0; r < m; ++r)
      if (g.has(r, x)) {
        any = true;
        for (uint32_t j = 0; j < d.width; ++j) want[j] += Gen::value(r, x, j);
      }
    const uint8_t* got = nullptr;
    if (sp) {
      if (!any) {
        if (k < sp->nnz() && static_cast<uint64_t>(sp->indices[k]) == x) {
          std::snprintf(buf, sizeof buf, "row %llu in the sparse result but on no rank", static_cast<unsigned long long>(x));
          return buf;
        }
        continue;
      }
      if (k >= sp->nnz() || static_cast<uint64_t>(sp->indices[k]) != x) {
        std::snprintf(buf, sizeof buf, "row %llu missing from the sparse result (position %zu of %zu)",
                      static_cast<unsigned long long>(x), k, sp->nnz());
        return buf;
      }
      got = &sp->values[k * d.width * es];
      ++k;
    } else {
      got = &(*dense)[x * d.width * es];
    }
    for (uint32_t j = 0; j < d.width; ++j) {
      const double v = difftest::get_value(d.dtype, got + j * es);
      if (v != want[j]) {
        std::snprintf(buf, sizeof buf, "row %llu column %u: %g, expected %g", static_cast<unsigned long long>(x), j, v, want[j]);
        return buf;
      }
    }
  }
  if (sp && k != sp->nnz()) return "the sparse result has " + std::to_string(sp->nnz() - k) + " rows past the last expected one";
  return "";
}

struct Sample {
  double t;
  long long calls, bytes;
  long long rss_kib, fds, threads;  // per rank, gathered on rank 0
  long long heap_kib, free_kib;     // malloc: bytes in use (all arenas, mmapped chunks included), free bytes kept
};

long long proc_status(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0) return std::stoll(line.substr(n));
  return -1;
}
long long open_fds() {
  long long n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir))
      if (e->d_name[0] != '.') ++n;
    closedir(dir);
    --n;  // the directory's own descriptor
  }
  return n;
}

// Heap in use and free bytes the allocator keeps, in KiB. glibc: mallinfo2 over every arena
// (uordblks, plus hblkhd for the chunks it mmapped); ASan replaces malloc: its allocator's counts.
void heap_kib(long long& in_use, long long& kept_free) {
#ifdef ZEN_SOAK_ASAN
  in_use = static_cast<long long>(__sanitizer_get_current_allocated_bytes() / 1024);
  kept_free = static_cast<long long>(__sanitizer_get_free_bytes() / 1024);
#else
  const struct mallinfo2 mi = mallinfo2();
  in_use = static_cast<long long>((mi.uordblks + mi.hblkhd) / 1024);
  kept_free = static_cast<long long>(mi.fordblks / 1024);
#endif
}

const char* dtype_str(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen: soak (seeded random calls, every result checked, RSS / descriptors / threads sampled)"};
  double seconds = 120, sample_s = 5, warmup_s = -1, timeout_s = 120, rss_growth_mib = 16, heap_growth_mib = 1;
  double max_mb = 64, inflight_mb = -1;
  uint64_t seed = 1;
  std::string csv;
  std::vector<std::string> only;
  double subcomm_p = 0.2;
  app.add_option("--seconds", seconds, "run time")->capture_default_str();
  app.add_option("--seed", seed, "seed of the mix")->capture_default_str();
  app.add_option("--max-mb", max_mb, "largest dense tensor (MB; sizes are drawn log-uniformly from 1 KB)")->capture_default_str();
  app.add_option("--inflight-mb", inflight_mb, "sparse input in flight per rank and step (MB; -1: half of --max-mb)")->capture_default_str();
  app.add_option("--sample-s", sample_s, "seconds between samples")->capture_default_str();
  app.add_option("--warmup-s", warmup_s, "warm-up after the forced largest calls (-1: a tenth of the run)")->capture_default_str();
  app.add_option("--rss-growth-mib", rss_growth_mib, "RSS above the warm-up maximum that counts as growth")->capture_default_str();
  app.add_option("--heap-growth-mib", heap_growth_mib, "heap in use above the warm-up maximum that counts as growth (a leak)")
      ->capture_default_str();
  app.add_option("--timeout-s", timeout_s, "communicator timeout (a hang becomes an error)")->capture_default_str();
  app.add_option("--csv", csv, "samples (rank 0 writes)");
  app.add_option("--schemes", only, "draw only these schemes (default: every one, and hierarchical)")->delimiter(',');
  app.add_option("--subcomm-p", subcomm_p, "share of steps on a sub-communicator")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (warmup_s < 0) warmup_s = seconds / 10;
  if (inflight_mb < 0) inflight_mb = max_mb / 2;
  const double inflight = inflight_mb * 1e6;

  mpi::Environment env(&argc, &argv, MPI_THREAD_MULTIPLE);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const auto timeout = Communicator::Ms(static_cast<int64_t>(timeout_s * 1000));
  auto world = mpi::create(MPI_COMM_WORLD);
  world->set_timeout(timeout);

  std::vector<std::string> schemes = scheme_names();
  schemes.push_back("hierarchical");
  if (!only.empty()) schemes = only;
  const DType dtypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16};
  const uint32_t widths[] = {1, 1, 2, 3, 8, 16};
  std::mt19937_64 order_rng(seed * 977 + static_cast<uint64_t>(rank));  // per rank: wait order

  // Cached plans on the world communicator, keyed by the draw's shape.
  std::map<std::string, std::unique_ptr<SparseAllreduce>> cache;
  std::vector<Sample> samples;  // rank 0: n per sample time
  long long calls = 0, bytes = 0, wrong = 0, nb_calls = 0, dense_calls = 0, subcomms = 0, plans_made = 0;
  std::map<std::string, long long> per_scheme;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  double next_sample = 0;
  const uint64_t warm_steps = 3 * schemes.size();
  double warm_end = 1e300;  // rank 0: samples before this time are the warm-up
  std::FILE* out = nullptr;
  if (rank == 0 && !csv.empty()) {
    out = std::fopen(csv.c_str(), "w");
    if (!out) {
      std::fprintf(stderr, "zen_soak: cannot write %s\n", csv.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::fprintf(out, "t_s,calls,bytes,rank,rss_kib,fds,threads,heap_kib,free_kib\n");
  }

  for (uint64_t step = 0;; ++step) {
    // Rank 0 decides (its clock): go on, sample, stop. No zen request is pending here.
    int ctl[2] = {0, 0};
    if (rank == 0) {
      const double t = elapsed();
      ctl[0] = t >= seconds;
      ctl[1] = ctl[0] || t >= next_sample || step == warm_steps;
      if (ctl[1]) next_sample = t + sample_s;
    }
    MPI_Bcast(ctl, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (ctl[1]) {
      cache.clear();
      malloc_trim(0);
      constexpr int K = 5;
      long long mine[K] = {proc_status("VmRSS:"), open_fds(), proc_status("Threads:"), 0, 0};
      heap_kib(mine[3], mine[4]);
      std::vector<long long> all(K * static_cast<size_t>(n));
      MPI_Gather(mine, K, MPI_LONG_LONG, all.data(), K, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        const double t = elapsed();
        for (int r = 0; r < n; ++r) {
          const long long* a = &all[K * static_cast<size_t>(r)];
          samples.push_back({t, calls, bytes, a[0], a[1], a[2], a[3], a[4]});
          if (out) std::fprintf(out, "%.1f,%lld,%lld,%d,%lld,%lld,%lld,%lld,%lld\n", t, calls, bytes, r, a[0], a[1], a[2], a[3], a[4]);
        }
        if (out) std::fflush(out);
        std::printf("zen_soak: t %.0f s, calls %lld, bytes %lld, rank 0 rss %lld KiB, heap %lld KiB (free %lld), fds %lld, threads %lld\n",
                    t, calls, bytes, all[0], all[3], all[4], all[1], all[2]);
        std::fflush(stdout);
      }
    }
    if (ctl[0]) break;
    if (step == warm_steps && rank == 0) warm_end = elapsed() + warmup_s;

    std::mt19937_64 g(splitmix(seed) ^ splitmix(step + 1));
    auto uni = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(g); };
    auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; };
    Draw d;
    d.comm = n > 1 && coin(subcomm_p) ? static_cast<int>(uni(1, 2)) : 0;
    d.scheme = schemes[uni(0, schemes.size() - 1)];
    d.dense_out = coin(0.5);
    d.blocking = coin(0.5);
    d.requests = d.blocking ? 1 : static_cast<int>(uni(1, 3));
    d.dtype = dtypes[uni(0, 3)];
    d.itype = coin(0.5) ? IndexType::I32 : IndexType::I64;
    d.width = widths[uni(0, 5)];
    const double lg = std::uniform_real_distribution<double>(std::log(1024.0), std::log(max_mb * 1e6))(g);
    d.rows = std::max<uint64_t>(1, static_cast<uint64_t>(std::exp(lg)) / (d.width * dtype_size(d.dtype)));
    const double u = std::uniform_real_distribution<double>(0, 1)(g);
    d.density = u < 0.05 ? 0.0 : u < 0.1 ? 1.0 : std::exp(std::uniform_real_distribution<double>(std::log(1e-4), 0)(g));
    d.ends = coin(0.5);
    if (step < warm_steps) {
      // Warm-up: every scheme at the largest size, 16-bit values in rows of one (the most rows, so
      // the largest index arrays), one request with sparse and one with dense output, then three.
      d.comm = 0;
      d.scheme = schemes[step % schemes.size()];
      const uint64_t v = step / schemes.size();
      d.dense_out = v == 2 ? step % 2 == 1 : v == 1;
      d.blocking = false;
      d.requests = v < 2 ? 1 : 3;
      d.dtype = DType::F16;
      d.itype = IndexType::I64;
      d.width = 1;
      d.rows = std::max<uint64_t>(1, static_cast<uint64_t>(max_mb * 1e6) / 2);
      d.density = 1.0;
    }
    // The bound on sparse input in flight: fewer requests, then a lower density that fills it (the
    // warm-up keeps its requests and fills it with them).
    {
      const double row_bytes = (d.itype == IndexType::I32 ? 4.0 : 8.0) + d.width * static_cast<double>(dtype_size(d.dtype));
      const double full = static_cast<double>(d.rows) * row_bytes;  // one request at full density
      if (step >= warm_steps)
        while (d.requests > 1 && d.requests * full * d.density > inflight) --d.requests;
      if (full * d.density > inflight / d.requests) d.density = inflight / d.requests / full;
      if (d.density < 1) d.threshold = static_cast<uint64_t>(d.density * 18446744073709551615.0);
    }
    const bool drop_plan = coin(0.15);
    const uint64_t call_base = step * 4;

    // The communicator of this step.
    MPI_Comm sub = MPI_COMM_NULL;
    std::unique_ptr<Communicator> sub_zen;
    Communicator* comm = world.get();
    if (d.comm != 0) {
      const int color = d.comm == 1 ? rank % 2 : (rank == n - 1 ? 1 : 0);
      MPI_Comm_split(MPI_COMM_WORLD, color, rank, &sub);
      sub_zen = mpi::create(sub);
      sub_zen->set_timeout(timeout);
      comm = sub_zen.get();
      ++subcomms;
    }
    const int m = comm->size(), cr = comm->rank();
    if (d.scheme == "hierarchical" && m % 2 != 0) d.scheme = "balanced";
    const TensorSpec spec{d.rows * d.width, d.width, d.dtype};
    char key[160];
    std::snprintf(key, sizeof key, "%s/%s/%llu/%u", d.scheme.c_str(), dtype_str(d.dtype),
                  static_cast<unsigned long long>(d.rows), d.width);
    const std::string desc = std::string(key) + (d.dense_out ? " dense" : " sparse") + (d.blocking ? " blocking" : " non-blocking x") +
                             (d.blocking ? "" : std::to_string(d.requests)) + " density " + std::to_string(d.density) +
                             (d.itype == IndexType::I32 ? " i32" : " i64") + " comm " + std::to_string(d.comm) +
                             " step " + std::to_string(step);
    try {
      std::unique_ptr<SparseAllreduce> own;
      SparseAllreduce* plan = nullptr;
      auto make = [&] {
        ++plans_made;
        return d.scheme == "hierarchical" ? make_hierarchical(*comm, spec, {}, HierarchicalOptions{2, "balanced"})
                                          : make_scheme(d.scheme, *comm, spec);
      };
      if (d.comm == 0) {
        auto& slot = cache[key];
        if (!slot) slot = make();
        plan = slot.get();
      } else {
        own = make();
        plan = own.get();
      }
      std::vector<Input> ins;
      for (int q = 0; q < d.requests; ++q) ins.push_back(make_input(d, call_base + static_cast<uint64_t>(q), cr));
      std::vector<SparseTensor> sp(d.requests);
      std::vector<std::vector<uint8_t>> dn(d.requests);
      std::vector<Request> reqs(d.requests);
      for (int q = 0; q < d.requests; ++q) {
        if (d.dense_out) dn[q].assign(spec.dense_len * dtype_size(d.dtype), 0xA5);  // never a valid result
        if (d.blocking) {
          if (d.dense_out) plan->run_dense(ins[q].view, dn[q].data());
          else plan->run(ins[q].view, sp[q]);
        } else {
          reqs[q] = d.dense_out ? plan->start_dense(ins[q].view, dn[q].data()) : plan->start(ins[q].view, sp[q]);
        }
      }
      if (!d.blocking) {
        std::vector<int> ord(d.requests);
        for (int q = 0; q < d.requests; ++q) ord[q] = q;
        std::shuffle(ord.begin(), ord.end(), order_rng);
        for (int q : ord) {
          if (order_rng() % 2) while (!reqs[q].test()) std::this_thread::yield();
          else reqs[q].wait();
        }
      }
      for (int q = 0; q < d.requests; ++q) {
        const std::string e = check(d, call_base + static_cast<uint64_t>(q), m, d.dense_out ? nullptr : &sp[q],
                                    d.dense_out ? &dn[q] : nullptr);
        if (!e.empty()) {
          ++wrong;
          std::printf("zen_soak: rank %d: WRONG result (%s, request %d): %s\n", rank, desc.c_str(), q, e.c_str());
          std::fflush(stdout);
        }
        ++calls;
        bytes += static_cast<long long>(spec.dense_len * dtype_size(d.dtype));
      }
      per_scheme[d.scheme] += d.requests;
      nb_calls += d.blocking ? 0 : d.requests;
      dense_calls += d.dense_out ? d.requests : 0;
      if (d.comm == 0 && drop_plan) cache.erase(key);
      if (cache.size() > 4) cache.erase(cache.begin());
    } catch (const std::exception& e) {
      std::printf("zen_soak: rank %d: call failed (%s): %s\n", rank, desc.c_str(), e.what());
      std::fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    sub_zen.reset();
    if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
  }
  cache.clear();
  long long wrong_all = 0;
  MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  // Peak RSS of each rank over the whole run (VmHWM), reported, not judged.
  const long long hwm = proc_status("VmHWM:");
  std::vector<long long> hwms(static_cast<size_t>(n));
  MPI_Gather(&hwm, 1, MPI_LONG_LONG, hwms.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (rank == 0) {
    if (out) std::fclose(out);
    // Growth: each rank's samples after the warm-up against its warm-up maximum.
    std::string growth;
    double worst_rss = 0, worst_heap = 0;
#ifdef ZEN_SOAK_ASAN
    const bool judge_rss = false;  // ASan's quarantine keeps freed memory resident by design
#else
    const bool judge_rss = true;
#endif
    long long fd_lo = 1 << 30, fd_hi = 0, th_lo = 1 << 30, th_hi = 0;
    size_t post = 0;
    for (int r = 0; r < n; ++r) {
      long long w_rss = 0, w_fd = 0, w_th = 0, p_rss = 0, p_fd = 0, p_th = 0, w_heap = 0, p_heap = 0;
      bool have_w = false, have_p = false;
      for (size_t i = static_cast<size_t>(r); i < samples.size(); i += static_cast<size_t>(n)) {
        const Sample& s = samples[i];
        fd_lo = std::min(fd_lo, s.fds), fd_hi = std::max(fd_hi, s.fds);
        th_lo = std::min(th_lo, s.threads), th_hi = std::max(th_hi, s.threads);
        if (s.t < warm_end || !have_w) {
          have_w = true;
          w_rss = std::max(w_rss, s.rss_kib), w_fd = std::max(w_fd, s.fds), w_th = std::max(w_th, s.threads);
          w_heap = std::max(w_heap, s.heap_kib);
        } else {
          have_p = true;
          ++post;
          p_rss = std::max(p_rss, s.rss_kib), p_fd = std::max(p_fd, s.fds), p_th = std::max(p_th, s.threads);
          p_heap = std::max(p_heap, s.heap_kib);
        }
      }
      if (!have_p) continue;
      const double g_mib = static_cast<double>(p_rss - w_rss) / 1024.0;
      worst_rss = std::max(worst_rss, g_mib);
      const double h_mib = static_cast<double>(p_heap - w_heap) / 1024.0;
      worst_heap = std::max(worst_heap, h_mib);
      char b[200];
      if (h_mib > heap_growth_mib) {
        std::snprintf(b, sizeof b, " rank %d heap in use +%.2f MiB over its warm-up maximum (limit %.2f): a leak;", r, h_mib,
                      heap_growth_mib);
        growth += b;
      }
      if (judge_rss && g_mib > rss_growth_mib) {
        std::snprintf(b, sizeof b, " rank %d RSS +%.1f MiB over its warm-up maximum (limit %.0f);", r, g_mib, rss_growth_mib);
        growth += b;
      }
      if (p_fd > w_fd) {
        std::snprintf(b, sizeof b, " rank %d descriptors %lld -> %lld;", r, w_fd, p_fd);
        growth += b;
      }
      if (p_th > w_th) {
        std::snprintf(b, sizeof b, " rank %d threads %lld -> %lld;", r, w_th, p_th);
        growth += b;
      }
    }
    if (post == 0) growth += " no sample after the warm-up (run longer or sample more often);";
    rc = (wrong_all != 0 || !growth.empty()) ? 1 : 0;
    std::string mix;
    for (auto& [s, c] : per_scheme) mix += (mix.empty() ? "" : " ") + s + " " + std::to_string(c);
    std::printf("zen_soak: %s calls %lld (non-blocking %lld, dense output %lld, sub-communicators %lld, plans %lld; %s), "
                "bytes %lld, %.0f s, samples %zu (%zu after the warm-up, which ended at %.0f s), wrong %lld, heap growth max %+.2f MiB "
                "(limit %.2f), RSS growth max %+.1f MiB (limit %.0f%s), descriptors %lld..%lld, threads %lld..%lld, peak RSS %.0f..%.0f MiB%s%s\n",
                rc ? "FAIL" : "PASS", calls, nb_calls, dense_calls, subcomms, plans_made, mix.c_str(), bytes, elapsed(),
                samples.size() / static_cast<size_t>(n), post / static_cast<size_t>(n), warm_end > 1e299 ? -1.0 : warm_end, wrong_all, worst_heap,
                heap_growth_mib, worst_rss, rss_growth_mib, judge_rss ? "" : ", not judged under ASan", fd_lo, fd_hi, th_lo, th_hi,
                *std::min_element(hwms.begin(), hwms.end()) / 1024.0, *std::max_element(hwms.begin(), hwms.end()) / 1024.0, growth.empty() ? "" : ", growth:", growth.c_str());
    std::fflush(stdout);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  world.reset();
  return rc;
}
