// zen_gpu_bench: GPU measurements of the Balanced-Parallelism path (docs/gpu.md).
//  1. hashing + compaction of a dense-length N fp32 gradient at density d (hash_partition of the
//     non-zero rows; and the dense-scan variant: count + select of non-zero rows + hash_partition);
//     goal: <= 0.5 ms for N = 214 M at 5.2 % on an H200 (`meets_goal`);
//  2. hash-bitmap encode (ballot) and decode + scatter (popcount prefix sums) of one owner's part;
//  3. the full Balanced-Parallelism path (DeviceBalanced::run_dense_from_dense) over n device-
//     loopback ranks on one GPU against the dense device-loopback allreduce of the same gradients,
//     with a bitwise comparison of the two results (#wrong, nccl-tests style). Default shape: the
//     Brown-corpus embedding gradient at n = 8 (48,547 rows of D = 64, 4.0 % per rank, gamma 4.34:
//     docs/workloads.md); --full adds the --rows-row DeepFM-like case (D = 1, 2.8 % per rank,
//     5.2 % union, gamma 1.86).
// Timed windows hold kernels and communication only: workspaces are prepared (size queries,
// layout) and allocated before them. Times are medians over --iters runs (CUDA events for 1-2; for
// 3 the per-iteration maximum over ranks of host wall time around the call + stream completion).
// The JSON summary (--json) is rewritten after every section, so a killed run leaves its figures.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "zen/cuda/balanced.hpp"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/kernels.hpp"
#include "zen/cuda/runtime.hpp"
#include "zen/encode/bitmap.hpp"

using namespace zen;
using json = nlohmann::json;

namespace {

using K = cuda::Kernels<cuda::Gpu>;

#define CK(x)                                                                                          \
  do {                                                                                                 \
    cudaError_t e_ = (x);                                                                              \
    if (e_ != cudaSuccess) ZEN_THROW(Result::CudaError, std::string(#x) + ": " + cudaGetErrorString(e_)); \
  } while (0)

struct Buf {
  void* p = nullptr;
  explicit Buf(size_t bytes) { CK(cudaMalloc(&p, std::max<size_t>(bytes, 1))); }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  template <typename T = void>
  T* get() const { return static_cast<T*>(p); }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename F>
double time_ms(F&& f, int warmup, int iters) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

// Rank r's gradient: a shared support (row density ds, seed shared) plus a private one (density dr).
void make_gradient(float* d, float* tmp, uint64_t rows, uint32_t D, double ds, double dr, int r, cudaStream_t s) {
  K::fill_sparse_gradient(d, DType::F32, rows, D, ds, 0.0, 1234, s);
  K::fill_sparse_gradient(tmp, DType::F32, rows, D, dr, 0.0, 99991 + static_cast<uint64_t>(r), s);
  const void* src[2] = {d, tmp};
  K::reduce_rank_order(src, 2, rows * D, DType::F32, ReduceOp::Sum, d, s);  // in place is fine: element-wise
}

struct FullPathShape {
  std::string name;
  uint64_t rows;
  uint32_t D;
  double local_density, union_density;  // of rows
};

void hashing_and_codec(uint64_t rows, double density, int ranks, int warmup, int iters, json& out,
                       const std::function<void()>& save) {
  const uint32_t n = static_cast<uint32_t>(ranks);
  const cuda::NonzeroPrepared nzp = K::nonzero_prepare(rows);
  Buf grad(rows * 4), ws_nz(nzp.bytes), cnt(8);
  K::fill_sparse_gradient(grad.get(), DType::F32, rows, 1, density, 0.0, 42, nullptr);
  K::count_nonzero_rows(nzp, grad.get(), DType::F32, rows, 1, cnt.get<uint64_t>(), ws_nz.get(), nzp.bytes, nullptr);
  uint64_t nnz = 0;
  CK(cudaMemcpy(&nnz, cnt.get(), 8, cudaMemcpyDeviceToHost));
  Buf idx(nnz * 8), entry(nnz * 4), pos(nnz * 8), counts(n * 8), serial(n * 4), spilled(8);
  K::nonzero_rows(nzp, grad.get(), DType::F32, rows, 1, idx.get<int64_t>(), cnt.get<uint64_t>(), ws_nz.get(), nzp.bytes,
                  nullptr);
  const Partitioner part = Partitioner::make(rows, n, 7);
  cuda::HashParams hp;
  hp.seed = 11;
  const cuda::HashPrepared prep = K::hash_prepare(nnz, n, hp);
  Buf ws(prep.bytes);
  auto hash = [&] {
    K::hash_partition(prep, idx.get(), IndexType::I64, nnz, part, ws.get(), prep.bytes, entry.get<uint32_t>(),
                      pos.get<uint64_t>(), counts.get<uint64_t>(), serial.get<uint32_t>(), spilled.get<uint64_t>(),
                      nullptr, nullptr);
  };
  const double t_hash = time_ms(hash, warmup, iters);
  auto dense_scan = [&] {
    K::count_nonzero_rows(nzp, grad.get(), DType::F32, rows, 1, cnt.get<uint64_t>(), ws_nz.get(), nzp.bytes, nullptr);
    K::nonzero_rows(nzp, grad.get(), DType::F32, rows, 1, idx.get<int64_t>(), cnt.get<uint64_t>(), ws_nz.get(),
                    nzp.bytes, nullptr);
    hash();
  };
  const double t_dense = time_ms(dense_scan, warmup, iters);
  std::vector<uint64_t> hc(n);
  uint64_t hs = 0;
  CK(cudaMemcpy(hc.data(), counts.get(), n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&hs, spilled.get(), 8, cudaMemcpyDeviceToHost));
  uint64_t mx = 0, total = 0;
  for (auto c : hc) {
    mx = std::max(mx, c);
    total += c;
  }
  const cuda::HashCaps caps = cuda::hash_caps(nnz, n, hp);
  json h;
  h["owners"] = n;
  h["rows"] = rows;
  h["nnz"] = nnz;
  h["counted"] = total;  // == nnz
  h["hash_compact_ms"] = t_hash;
  h["goal_ms"] = 0.5;
  h["meets_goal"] = t_hash <= 0.5;
  h["dense_scan_hash_compact_ms"] = t_dense;
  h["workspace_bytes"] = prep.bytes;
  h["table_bytes"] = static_cast<uint64_t>(caps.cap1) * n * 4;
  h["push_imbalance"] = nnz ? static_cast<double>(mx) * n / static_cast<double>(nnz) : 1.0;
  h["spilled"] = hs;
  out["hashing"] = h;
  save();
  std::printf("hashing: N=%llu nnz=%llu (%.2f%%) n=%u: hash+compact %.3f ms (goal 0.5), dense scan+hash+compact %.3f ms, "
              "push imbalance %.4f, table %.1f MB, spilled %llu, workspace %.1f MB\n",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(nnz), 100.0 * nnz / rows, n, t_hash,
              t_dense, h["push_imbalance"].get<double>(), caps.cap1 * n * 4 / 1e6, static_cast<unsigned long long>(hs),
              prep.bytes / 1e6);
  std::fflush(stdout);

  // Bitmap encode / decode of owner 0's part: its result positions = positions of the rows it owns.
  const uint64_t m = part.owner_size(0);
  std::vector<uint64_t> hpos(nnz);
  std::vector<uint32_t> hentry(hc[0]);
  CK(cudaMemcpy(hpos.data(), pos.get(), nnz * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hentry.data(), entry.get(), hc[0] * 4, cudaMemcpyDeviceToHost));
  std::vector<uint64_t> mine;
  for (uint32_t e : hentry) mine.push_back(hpos[e]);
  std::sort(mine.begin(), mine.end());
  const uint64_t Km = mine.size();
  const cuda::ScatterPrepared sp = K::scatter_prepare(m);
  Buf dpos(Km * 8), flags(m), msg(encode::bitmap_bytes(m) + Km * 4), dense(rows * 4), bws(sp.bytes),
      err(sizeof(cuda::DeviceError));
  CK(cudaMemcpy(dpos.get(), mine.data(), Km * 8, cudaMemcpyHostToDevice));
  CK(cudaMemset(msg.get(), 0, encode::bitmap_bytes(m) + Km * 4));
  CK(cudaMemset(err.get(), 0, sizeof(cuda::DeviceError)));
  auto enc = [&] { K::bitmap_encode(dpos.get<uint64_t>(), Km, m, flags.get<uint8_t>(), msg.get<uint8_t>(), nullptr); };
  const double t_enc = time_ms(enc, warmup, iters);
  auto dec = [&] {
    K::bitmap_scatter(sp, msg.get<uint8_t>(), m, msg.get<uint8_t>() + encode::bitmap_bytes(m), Km, part, 0, 1, DType::F32,
                      dense.get(), bws.get(), sp.bytes, err.get<cuda::DeviceError>(), nullptr);
  };
  const double t_dec = time_ms(dec, warmup, iters);
  cuda::DeviceError he{};
  CK(cudaMemcpy(&he, err.get(), sizeof he, cudaMemcpyDeviceToHost));
  const double bm_bytes = static_cast<double>(encode::bitmap_bytes(m));
  json b;
  b["positions"] = m;
  b["set_bits"] = Km;
  b["bitmap_bytes"] = bm_bytes;
  b["encode_ms"] = t_enc;
  b["decode_scatter_ms"] = t_dec;
  b["encode_GBps"] = bm_bytes / (t_enc * 1e6);               // bitmap bytes produced per second
  b["decode_GBps"] = (bm_bytes + Km * 4.0) / (t_dec * 1e6);  // bitmap + values consumed per second
  b["decode_error"] = cuda::device_error_name(he.code);
  out["bitmap"] = b;
  save();
  std::printf("bitmap: |I_0|=%llu bits, K=%llu: encode %.3f ms (%.1f GB/s of bitmap), decode+scatter %.3f ms "
              "(%.1f GB/s of bitmap+values)%s\n",
              static_cast<unsigned long long>(m), static_cast<unsigned long long>(Km), t_enc, b["encode_GBps"].get<double>(),
              t_dec, b["decode_GBps"].get<double>(), he.code ? " DECODE ERROR" : "");
  std::fflush(stdout);
}

json full_path(const FullPathShape& shape, int n, int warmup, int iters) {
  const uint64_t rows = shape.rows, N = rows * shape.D;
  const double dr = n > 1 ? std::max(0.0, (shape.union_density - shape.local_density) / (n - 1)) : 0.0;
  const double ds = std::max(0.0, shape.local_density - dr);
  std::mutex mu;
  std::vector<std::vector<double>> bp_t(n), ar_t(n);
  std::vector<uint64_t> wrong(n, 0), result_nnz(n, 0), local_nnz(n, 0);
  std::vector<double> push_imb(n), pull_imb(n);
  std::vector<std::string> encodings(n);
  std::vector<json> phases(n);
  size_t ws_bytes = 0;
  cuda::loopback::run(n, [&](Communicator& comm) {
    const int r = comm.rank();
    cudaStream_t s = static_cast<cudaStream_t>(comm.stream());
    const cuda::NonzeroPrepared nzp = K::nonzero_prepare(rows);
    Buf grad(N * 4), tmp(N * 4), out_bp(N * 4), cntb(8), nzws(nzp.bytes);
    make_gradient(grad.get<float>(), tmp.get<float>(), rows, shape.D, ds, dr, r, s);
    K::count_nonzero_rows(nzp, grad.get(), DType::F32, rows, shape.D, cntb.get<uint64_t>(), nzws.get(), nzp.bytes, s);
    uint64_t k = 0;
    CK(cudaMemcpyAsync(&k, cntb.get(), 8, cudaMemcpyDeviceToHost, s));
    cuda::stream_wait(comm, s);
    local_nnz[r] = k;
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = k + k / 8 + 1024;
    lim.recv_capacity = 2 * lim.max_nnz + 4096;  // h0 balances the push: ~k per rank
    const TensorSpec spec{N, shape.D, DType::F32};
    SchemeOptions opt;
    opt.seed = 5;
    cuda::DeviceBalanced bp(comm, spec, opt, lim);
    if (r == 0) ws_bytes = cuda::DeviceBalanced::workspace_bytes(spec, n, opt, bp.limits());
    for (int it = 0; it < warmup + iters; ++it) {
      cuda::stream_wait(comm, s);
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      bp.run_dense_from_dense(grad.get(), out_bp.get());
      bp.synchronize();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (it >= warmup) bp_t[r].push_back(ms);
    }
    result_nnz[r] = bp.report().result_nnz;
    push_imb[r] = bp.report().push_imbalance;
    pull_imb[r] = bp.report().pull_imbalance;
    encodings[r] = bp.report().encoding;
    json ph = json::array();
    for (auto& p : bp.report().phases) ph.push_back({{"name", p.name}, {"ms", p.seconds * 1e3}, {"sent", p.sent}, {"recv", p.recv}});
    phases[r] = ph;
    // Dense allreduce of the same gradient (tmp is reused as the dense buffer).
    for (int it = 0; it < warmup + iters; ++it) {
      CK(cudaMemcpyAsync(tmp.get(), grad.get(), N * 4, cudaMemcpyDeviceToDevice, s));
      cuda::stream_wait(comm, s);
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      comm.allreduce(tmp.get(), N, DType::F32);
      cuda::stream_wait(comm, s);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (it >= warmup) ar_t[r].push_back(ms);
    }
    // #wrong: elements where the sparse result differs bitwise from the dense allreduce.
    std::vector<uint32_t> a(N), b(N);
    CK(cudaMemcpyAsync(a.data(), out_bp.get(), N * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(b.data(), tmp.get(), N * 4, cudaMemcpyDeviceToHost, s));
    cuda::stream_wait(comm, s);
    uint64_t w = 0;
    for (uint64_t i = 0; i < N; ++i) w += a[i] != b[i];
    std::lock_guard<std::mutex> lk(mu);
    wrong[r] = w;
  });
  auto iter_max = [&](const std::vector<std::vector<double>>& t) {
    std::vector<double> per;
    for (size_t i = 0; i < t[0].size(); ++i) {
      double mx = 0;
      for (auto& v : t) mx = std::max(mx, v[i]);
      per.push_back(mx);
    }
    return median(per);
  };
  const double t_bp = iter_max(bp_t), t_ar = iter_max(ar_t);
  uint64_t total_wrong = 0, lsum = 0;
  for (int r = 0; r < n; ++r) {
    total_wrong += wrong[r];
    lsum += local_nnz[r];
  }
  json f;
  f["shape"] = shape.name;
  f["ranks"] = n;
  f["rows"] = rows;
  f["row_width"] = shape.D;
  f["local_density_mean"] = static_cast<double>(lsum) / n / static_cast<double>(rows);
  f["union_density"] = static_cast<double>(result_nnz[0]) / static_cast<double>(rows);
  f["gamma"] = lsum ? static_cast<double>(result_nnz[0]) * n / static_cast<double>(lsum) : 0.0;
  f["balanced_ms"] = t_bp;
  f["dense_allreduce_ms"] = t_ar;
  f["speedup_vs_dense"] = t_bp > 0 ? t_ar / t_bp : 0.0;
  f["dense_equiv_algbw_GBps"] = N * 4.0 / (t_bp * 1e6);
  f["push_imbalance"] = push_imb[0];
  f["pull_imbalance"] = pull_imb[0];
  f["pull_encoding"] = encodings[0];
  f["workspace_bytes_per_rank"] = ws_bytes;
  f["wrong"] = total_wrong;
  f["phases_rank0_last_call"] = phases[0];
  std::printf("full path (%s): %d device-loopback ranks, %llu rows x D=%u, local density %.3f%%, union %.3f%% (gamma %.2f): "
              "balanced %.3f ms vs dense allreduce %.3f ms (x%.2f), pull %s, push/pull imbalance %.3f/%.3f, #wrong %llu\n",
              shape.name.c_str(), n, static_cast<unsigned long long>(rows), shape.D,
              100 * f["local_density_mean"].get<double>(), 100 * f["union_density"].get<double>(), f["gamma"].get<double>(),
              t_bp, t_ar, f["speedup_vs_dense"].get<double>(), encodings[0].c_str(), push_imb[0], pull_imb[0],
              static_cast<unsigned long long>(total_wrong));
  std::fflush(stdout);
  if (total_wrong)
    std::fprintf(stderr, "zen_gpu_bench: the sparse result differs from the dense allreduce in %llu elements\n",
                 static_cast<unsigned long long>(total_wrong));
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen GPU benchmark: hashing, bitmap codec, Balanced Parallelism vs dense allreduce (device loopback)"};
  uint64_t rows = 214000000;
  double density = 0.052;
  int ranks = 8, iters = 5, warmup = 1;
  FullPathShape brown{"brown", 48547, 64, 0.040, 0.040 * 4.34};
  bool full = false, skip_hashing = false;
  std::string json_path;
  app.add_option("--rows", rows, "dense length N (fp32 elements) for hashing, the codec and --full");
  app.add_option("--density", density, "density of the hashed tensor");
  app.add_option("--ranks", ranks, "device-loopback ranks for the full path")->check(CLI::Range(1, 64));
  app.add_option("--bp-rows", brown.rows, "rows of the full path's default shape (Brown: 48547)");
  app.add_option("--bp-d", brown.D, "row width D of the full path's default shape (Brown: 64)")->check(CLI::Range(1, 4096));
  app.add_option("--local-density", brown.local_density, "per-rank row density of the full path's default shape");
  app.add_option("--union-density", brown.union_density, "row density of the sum over ranks (overlap control)");
  app.add_flag("--full", full, "also the full path on --rows rows (D = 1, 2.8 % per rank, 5.2 % union)");
  app.add_flag("--skip-hashing", skip_hashing, "only the full path(s)");
  app.add_option("--iters", iters, "timed iterations")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", warmup, "warm-up iterations")->check(CLI::Range(0, 100));
  app.add_option("--json", json_path, "write the JSON summary here (after every section)");
  CLI11_PARSE(app, argc, argv);

  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::fprintf(stderr, "zen_gpu_bench: no GPU (%s)\n", why.c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  json out;
  out["device"] = prop.name;
  out["rows"] = rows;
  out["density"] = density;
  out["iters"] = iters;
  // Written whole, then renamed over the summary: a kill leaves the previous section's valid JSON.
  auto save = [&] {
    if (json_path.empty()) return;
    const std::string tmp = json_path + ".tmp";
    {
      std::ofstream f(tmp);
      f << out.dump(2) << "\n";
      if (!f.flush()) return;
    }
    std::rename(tmp.c_str(), json_path.c_str());
  };
  uint64_t wrong = 0;
  try {
    if (!skip_hashing) hashing_and_codec(rows, density, ranks, warmup, iters, out, save);
    CK(cudaDeviceSynchronize());
    out["full_path"] = full_path(brown, ranks, warmup, iters);
    wrong += out["full_path"]["wrong"].get<uint64_t>();
    save();
    if (full) {
      out["full_path_large"] = full_path(FullPathShape{"deepfm", rows, 1, 0.028, 0.052}, ranks, warmup, iters);
      wrong += out["full_path_large"]["wrong"].get<uint64_t>();
      save();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zen_gpu_bench: %s\n", e.what());
    out["error"] = e.what();
    save();
    return 1;
  }
  return wrong == 0 ? 0 : 1;
}
