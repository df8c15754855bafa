#pragma once
// HierarchicalImpl<B>: the device hierarchical mode (include/zen/cuda/hierarchical.hpp, docs/gpu.md),
// written once for both backends (B = Gpu: device memory and CUDA kernels; B = Host: the same on
// the CPU).
#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "balanced_core.hpp"
#include "zen/cuda/comm.hpp"

namespace zen::cuda::detail {

template <class B>
class HierarchicalImpl final : public DeviceHierarchical::Core {
 public:
  using M = Memory<B>;

  HierarchicalImpl(Communicator& intra, Communicator& inter, const TensorSpec& spec, const SchemeOptions& opt,
                   DeviceBalancedLimits lim, SyncReport& report)
      : intra_(intra), inter_(inter), spec_(spec), report_(report) {
    const MemSpace want = std::is_same_v<B, Gpu> ? MemSpace::Device : MemSpace::Host;
    ZEN_ENFORCE(intra.memory_space() == want && inter.memory_space() == want,
                where() + "intra and inter communicators must hold the same memory");
    ZEN_ENFORCE(intra.stream() == inter.stream(), where() + "intra and inter communicators must use the same stream");
    ZEN_ENFORCE(spec.row_width >= 1 && spec.dense_len % spec.row_width == 0,
                where() + "dense length " + std::to_string(spec.dense_len) + " is not divisible by row width " +
                    std::to_string(spec.row_width));
    ZEN_ENFORCE(intra.size() <= 64, where() + "node size " + std::to_string(intra.size()) + " exceeds 64");
    L_ = intra.size();
    l_ = intra.rank();
    rb_ = spec.row_width * dtype_size(spec.dtype);
    const uint64_t R = spec.dense_len / spec.row_width;
    lo_.assign(static_cast<size_t>(L_) + 1, 0);
    for (int j = 0; j < L_; ++j)
      lo_[j + 1] = lo_[j] + R / L_ + (static_cast<uint64_t>(j) < R % static_cast<uint64_t>(L_) ? 1 : 0);
    const uint64_t mine = rows(l_);
    recv_.p = M::alloc(std::max<size_t>(1, L_ * mine * rb_));
    partial_.p = M::alloc(std::max<size_t>(1, mine * rb_));
    chunk_out_.p = M::alloc(std::max<size_t>(1, mine * rb_));
    if (lim.max_nnz == 0) lim.max_nnz = mine;
    // Every rank of an inter group has the same local index, hence the same chunk (the inner setup
    // checks that all of them agree on N).
    inner_ = std::make_unique<DeviceBalanced>(inter, TensorSpec{mine * spec.row_width, spec.row_width, spec.dtype}, opt, lim);
  }

  void run_dense_from_dense(const void* d_grad, void* d_out) override {
    const auto t0 = std::chrono::steady_clock::now();
    const int L = L_;
    const uint64_t mine = rows(l_);
    const size_t mb = mine * rb_;
    auto phase = [&](const char* name, const TrafficStats& before, std::chrono::steady_clock::time_point t) {
      PhaseReport p;
      p.name = name;
      TrafficStats d = intra_.stats() - before;
      p.sent = d.total_sent();
      p.recv = d.total_recv();
      p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
      return p;
    };
    std::vector<size_t> sc(L), sd(L), rc(L), rd(L);
    // 1. Dense reduce-scatter inside the node: chunk j of the gradient goes to local rank j.
    auto s0 = intra_.stats();
    auto t1 = std::chrono::steady_clock::now();
    for (int j = 0; j < L; ++j) {
      sc[j] = rows(j) * rb_;
      sd[j] = lo_[j] * rb_;
      rc[j] = mb;
      rd[j] = static_cast<size_t>(j) * mb;
    }
    intra_.alltoallv(d_grad, sc.data(), sd.data(), recv_.p, rc.data(), rd.data());
    std::vector<const void*> srcs(static_cast<size_t>(L));
    for (int j = 0; j < L; ++j) srcs[j] = static_cast<const uint8_t*>(recv_.p) + static_cast<size_t>(j) * mb;
    Kernels<B>::reduce_rank_order(srcs.data(), L, mine * spec_.row_width, spec_.dtype, ReduceOp::Sum, partial_.p,
                                  intra_.stream());
    PhaseReport rs = phase("reduce_scatter", s0, t1);
    // 2. Across nodes.
    const void* result = partial_.p;
    if (inter_.size() > 1) {
      inner_->run_dense_from_dense(partial_.p, chunk_out_.p);
      result = chunk_out_.p;
      report_ = inner_->report();
    } else {
      // One node: the partial is the result. A row with no value != 0 is absent in the host mode
      // (+0.0), while the dense sum of rows of -0.0 is -0.0: clear such rows.
      Kernels<B>::clear_zero_rows(partial_.p, spec_.dtype, mine, spec_.row_width, intra_.stream());
      report_ = SyncReport{};
      report_.encoding = "none";
    }
    report_.scheme = "hierarchical";
    report_.phases.insert(report_.phases.begin(), rs);
    report_.sent += rs.sent;
    report_.recv += rs.recv;
    // 3. Dense allgather inside the node, straight into the output.
    s0 = intra_.stats();
    t1 = std::chrono::steady_clock::now();
    for (int j = 0; j < L; ++j) {
      rc[j] = rows(j) * rb_;
      rd[j] = lo_[j] * rb_;
    }
    intra_.allgatherv(result, mb, d_out, rc.data(), rd.data());
    PhaseReport ag = phase("allgather", s0, t1);
    report_.phases.push_back(ag);
    report_.sent += ag.sent;
    report_.recv += ag.recv;
    report_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void synchronize() override {
    if (inter_.size() > 1) inner_->synchronize();
    if constexpr (std::is_same_v<B, Gpu>) stream_wait(intra_, intra_.stream());
  }

 private:
  uint64_t rows(int j) const { return lo_[j + 1] - lo_[j]; }
  std::string where() const {
    return "rank " + std::to_string(intra_.rank()) + "/" + std::to_string(inter_.rank()) + " hierarchical(" +
           (std::is_same_v<B, Gpu> ? "device" : "device kernels on the host") + "): ";
  }
  struct Owned {
    void* p = nullptr;
    Owned() = default;
    Owned(const Owned&) = delete;
    Owned& operator=(const Owned&) = delete;
    ~Owned() { M::release(p); }
  };

  Communicator& intra_;
  Communicator& inter_;
  TensorSpec spec_;
  SyncReport& report_;
  int L_ = 1, l_ = 0;
  size_t rb_ = 0;
  std::vector<uint64_t> lo_;
  Owned recv_, partial_, chunk_out_;
  std::unique_ptr<DeviceBalanced> inner_;
};

}  // namespace zen::cuda::detail
