// The C API's GPU path (zen.h only, plus the CUDA runtime for buffers): device-loopback ranks on one
// GPU, scheme balanced with sparse and dense-gradient input and the device hierarchical mode over
// caller-made node communicators; results equal to the exact sum on every rank. Skips without a GPU
// (fails with ZEN_GPU_REQUIRED).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "zen/zen.h"

namespace {

constexpr uint64_t kRows = 1003;  // not divisible by 2..8
constexpr uint32_t kD = 2;
constexpr uint64_t kN = kRows * kD;

bool have_gpu(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    *why = e != cudaSuccess ? cudaGetErrorString(e) : "no device";
    return false;
  }
  return true;
}

// Rank r: rows 0, R-1, 3r+1 (small integers).
void input(int r, std::vector<int64_t>& idx, std::vector<float>& val) {
  idx = {0, static_cast<int64_t>(kRows - 1), 3 * r + 1};
  val.resize(idx.size() * kD);
  for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<float>((static_cast<int>(i) + r) % 5) - 2.0f;
}

std::vector<float> reference(int n) {
  std::vector<float> w(kN, 0.0f);
  for (int r = 0; r < n; ++r) {
    std::vector<int64_t> idx;
    std::vector<float> val;
    input(r, idx, val);
    for (size_t i = 0; i < idx.size(); ++i)
      for (uint32_t k = 0; k < kD; ++k) w[static_cast<size_t>(idx[i]) * kD + k] += val[i * kD + k];
  }
  return w;
}

// One rank's thread: its own stream, device buffers, the plan, both inputs, checks.
void rank_body(int n, int r, zenComm_t world, zenComm_t intra, zenComm_t inter, std::vector<std::string>& errors) {
  auto fail = [&](const std::string& m) { errors[static_cast<size_t>(r)] += m + " [" + zenGetLastError() + "]; "; };
  cudaSetDevice(0);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  zenCommSetStream(world, st);
  if (intra) zenCommSetStream(intra, st);
  if (inter) zenCommSetStream(inter, st);
  std::vector<int64_t> idx;
  std::vector<float> val;
  input(r, idx, val);
  std::vector<float> grad(kN, 0.0f);
  for (size_t i = 0; i < idx.size(); ++i)
    for (uint32_t k = 0; k < kD; ++k) grad[static_cast<size_t>(idx[i]) * kD + k] += val[i * kD + k];
  const std::vector<float> want = reference(n);
  int64_t* d_idx = nullptr;
  float *d_val = nullptr, *d_grad = nullptr, *d_out = nullptr;
  cudaMalloc(&d_idx, idx.size() * sizeof(int64_t));
  cudaMalloc(&d_val, val.size() * sizeof(float));
  cudaMalloc(&d_grad, kN * sizeof(float));
  cudaMalloc(&d_out, kN * sizeof(float));
  cudaMemcpy(d_idx, idx.data(), idx.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
  cudaMemcpy(d_val, val.data(), val.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_grad, grad.data(), kN * sizeof(float), cudaMemcpyHostToDevice);
  std::vector<float> got(kN);
  zenOptions_t o;
  zenOptionsInit(&o);
  o.device_max_nnz = 8;
  o.intra = intra;
  o.inter = inter;
  zenSparseAllreduce_t op = nullptr;
  const char* scheme = intra ? "hierarchical" : "balanced";
  if (zenSparseAllreduceCreate(&op, world, scheme, kN, kD, zenFloat32, &o) != zenSuccess) {
    fail(std::string("create ") + scheme);
  } else {
    if (!intra) {
      if (zenSparseAllreduceDense(op, idx.size(), d_idx, zenInt64, d_val, d_out) != zenSuccess ||
          zenSparseAllreduceSynchronize(op) != zenSuccess)
        fail("dense");
      cudaMemcpy(got.data(), d_out, kN * sizeof(float), cudaMemcpyDeviceToHost);
      if (got != want) fail("dense result differs");
      size_t k = 0;
      if (zenSparseAllreduceSparse(op, idx.size(), d_idx, zenInt64, d_val, &k) != zenUnsupported) fail("sparse not refused");
    }
    if (zenSparseAllreduceDenseFromDense(op, d_grad, d_out) != zenSuccess || zenSparseAllreduceSynchronize(op) != zenSuccess)
      fail("dense from dense");
    cudaMemcpy(got.data(), d_out, kN * sizeof(float), cudaMemcpyDeviceToHost);
    if (got != want) fail("dense-from-dense result differs");
    zenSparseAllreduceDestroy(op);
  }
  cudaFree(d_idx);
  cudaFree(d_val);
  cudaFree(d_grad);
  cudaFree(d_out);
  cudaStreamDestroy(st);
}

void run(int n, int L) {
  std::vector<zenComm_t> world(n), intra(n, nullptr), inter(n, nullptr);
  ASSERT_EQ(zenCommInitDeviceLoopback(world.data(), n, 0), zenSuccess) << zenGetLastError();
  if (L > 0) {
    for (int g = 0; g < n / L; ++g) ASSERT_EQ(zenCommInitDeviceLoopback(&intra[g * L], L, 0), zenSuccess);
    std::vector<zenComm_t> tmp(n / L);
    for (int l = 0; l < L; ++l) {
      ASSERT_EQ(zenCommInitDeviceLoopback(tmp.data(), n / L, 0), zenSuccess);
      for (int g = 0; g < n / L; ++g) inter[g * L + l] = tmp[g];
    }
  }
  std::vector<std::string> errors(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) th.emplace_back(rank_body, n, r, world[r], intra[r], inter[r], std::ref(errors));
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(errors[r].empty()) << "n=" << n << " L=" << L << " rank " << r << ": " << errors[r];
    zenCommDestroy(world[r]);
    if (intra[r]) zenCommDestroy(intra[r]);
    if (inter[r]) zenCommDestroy(inter[r]);
  }
}

// ZEN_GPU_REQUIRED (scripts/gpu_check.sh --run): a missing GPU fails instead of skipping.
void skip_or_fail(const std::string& why) {
  const char* e = std::getenv("ZEN_GPU_REQUIRED");
  if (e && *e && std::string(e) != "0") FAIL() << "ZEN_GPU_REQUIRED is set, but the test would skip: " << why;
  GTEST_SKIP() << why;
}

TEST(CapiGpu, BalancedOnDeviceLoopback) {
  std::string why;
  if (!have_gpu(&why)) return skip_or_fail("no GPU: " + why);
  for (int n = 1; n <= 5; ++n) run(n, 0);
}

TEST(CapiGpu, HierarchicalOnDeviceLoopback) {
  std::string why;
  if (!have_gpu(&why)) return skip_or_fail("no GPU: " + why);
  run(4, 2);
  run(6, 3);
}

}  // namespace
