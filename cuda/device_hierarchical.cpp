// Hierarchical mode on the GPU (see include/zen/cuda/hierarchical.hpp and docs/gpu.md).
#include "zen/cuda/hierarchical.hpp"

#include <cuda_runtime.h>

#include <chrono>

#include "check.cuh"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/kernels.hpp"

namespace zen::cuda {

struct DeviceHierarchical::Impl {
  Communicator& intra;
  Communicator& inter;
  TensorSpec spec;
  int L = 1, l = 0;
  size_t rb = 0;
  std::vector<uint64_t> lo;
  void* recv = nullptr;
  void* partial = nullptr;
  void* chunk_out = nullptr;
  std::unique_ptr<DeviceBalanced> inner;
  SyncReport report;

  Impl(Communicator& a, Communicator& b, const TensorSpec& s) : intra(a), inter(b), spec(s) {}
  ~Impl() {
    for (void* p : {recv, partial, chunk_out})
      if (p) cudaFree(p);
  }
  uint64_t rows(int j) const { return lo[j + 1] - lo[j]; }
  std::string where() const { return "rank " + std::to_string(intra.rank()) + "/" + std::to_string(inter.rank()) + " hierarchical(device): "; }
};

DeviceHierarchical::DeviceHierarchical(Communicator& intra, Communicator& inter, const TensorSpec& spec,
                                       const SchemeOptions& opt, DeviceBalancedLimits lim)
    : impl_(std::make_unique<Impl>(intra, inter, spec)) {
  Impl& im = *impl_;
  ZEN_ENFORCE(intra.memory_space() == MemSpace::Device && inter.memory_space() == MemSpace::Device,
              im.where() + "intra and inter communicators must be device backends");
  ZEN_ENFORCE(intra.stream() == inter.stream(), im.where() + "intra and inter communicators must use the same stream");
  ZEN_ENFORCE(spec.row_width >= 1 && spec.dense_len % spec.row_width == 0,
              im.where() + "dense length " + std::to_string(spec.dense_len) + " is not divisible by row width " +
                  std::to_string(spec.row_width));
  ZEN_ENFORCE(intra.size() <= 64, im.where() + "node size " + std::to_string(intra.size()) + " exceeds 64");
  im.L = intra.size();
  im.l = intra.rank();
  im.rb = spec.row_width * dtype_size(spec.dtype);
  const uint64_t R = spec.dense_len / spec.row_width;
  im.lo.assign(static_cast<size_t>(im.L) + 1, 0);
  for (int j = 0; j < im.L; ++j)
    im.lo[j + 1] = im.lo[j] + R / im.L + (static_cast<uint64_t>(j) < R % static_cast<uint64_t>(im.L) ? 1 : 0);
  const uint64_t mine = im.rows(im.l);
  ZEN_CUDA_CHECK(cudaMalloc(&im.recv, std::max<size_t>(1, im.L * mine * im.rb)));
  ZEN_CUDA_CHECK(cudaMalloc(&im.partial, std::max<size_t>(1, mine * im.rb)));
  ZEN_CUDA_CHECK(cudaMalloc(&im.chunk_out, std::max<size_t>(1, mine * im.rb)));
  if (lim.max_nnz == 0) lim.max_nnz = mine;
  // Every rank of an inter group has the same local index, hence the same chunk (the inner setup
  // checks that all of them agree on N).
  im.inner = std::make_unique<DeviceBalanced>(inter, TensorSpec{mine * spec.row_width, spec.row_width, spec.dtype}, opt, lim);
}

DeviceHierarchical::~DeviceHierarchical() = default;

void DeviceHierarchical::run_dense_from_dense(const void* d_grad, void* d_out) {
  Impl& im = *impl_;
  im.report = SyncReport{};
  const auto t0 = std::chrono::steady_clock::now();
  const int L = im.L;
  const uint64_t mine = im.rows(im.l);
  const size_t mb = mine * im.rb;
  auto phase = [&](const char* name, const TrafficStats& before, std::chrono::steady_clock::time_point t) {
    PhaseReport p;
    p.name = name;
    TrafficStats d = im.intra.stats() - before;
    p.sent = d.total_sent();
    p.recv = d.total_recv();
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    return p;
  };
  std::vector<size_t> sc(L), sd(L), rc(L), rd(L);
  // 1. Dense reduce-scatter inside the node: chunk j of the gradient goes to local rank j.
  auto s0 = im.intra.stats();
  auto t1 = std::chrono::steady_clock::now();
  for (int j = 0; j < L; ++j) {
    sc[j] = im.rows(j) * im.rb;
    sd[j] = im.lo[j] * im.rb;
    rc[j] = mb;
    rd[j] = static_cast<size_t>(j) * mb;
  }
  im.intra.alltoallv(d_grad, sc.data(), sd.data(), im.recv, rc.data(), rd.data());
  std::vector<const void*> srcs(static_cast<size_t>(L));
  for (int j = 0; j < L; ++j) srcs[j] = static_cast<const uint8_t*>(im.recv) + static_cast<size_t>(j) * mb;
  reduce_rank_order(srcs.data(), L, mine * im.spec.row_width, im.spec.dtype, ReduceOp::Sum, im.partial, im.intra.stream());
  PhaseReport rs = phase("reduce_scatter", s0, t1);
  // 2. Across nodes.
  const void* result = im.partial;
  if (im.inter.size() > 1) {
    im.inner->run_dense_from_dense(im.partial, im.chunk_out);
    result = im.chunk_out;
    im.report = im.inner->report();
  } else {
    im.report.encoding = "none";
  }
  im.report.phases.insert(im.report.phases.begin(), rs);
  im.report.sent += rs.sent;
  im.report.recv += rs.recv;
  // 3. Dense allgather inside the node, straight into the output.
  s0 = im.intra.stats();
  t1 = std::chrono::steady_clock::now();
  for (int j = 0; j < L; ++j) {
    rc[j] = im.rows(j) * im.rb;
    rd[j] = im.lo[j] * im.rb;
  }
  im.intra.allgatherv(result, mb, d_out, rc.data(), rd.data());
  PhaseReport ag = phase("allgather", s0, t1);
  im.report.phases.push_back(ag);
  im.report.sent += ag.sent;
  im.report.recv += ag.recv;
  im.report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void DeviceHierarchical::synchronize() {
  if (impl_->inter.size() > 1) impl_->inner->synchronize();
  stream_wait(impl_->intra, impl_->intra.stream());
}

const SyncReport& DeviceHierarchical::report() const { return impl_->report; }

}  // namespace zen::cuda
