#pragma once
// A rank that arrives late: every other rank times out inside a plan's call, destroys the plan and
// frees its input and output buffers, and keeps making MPI (or loopback) calls; only then does the
// late rank make the same call. Nothing may read or write the freed memory (ASan watches), the late
// rank gets an error, not a hang, and plans whose buffers MPI may still hold were kept alive by the
// communicator (quarantine).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "zen/comm/communicator.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::reltest {

struct LateResult {
  bool threw = false;
  Result code = Result::Success;
  std::string what;
};

/// One round on this rank. `late` is the rank that arrives after the others have timed out (the
/// caller sleeps it). The buffers live only inside this function.
inline LateResult late_rank_round(Communicator& c, const std::string& scheme, bool dense_out, int late,
                                  const std::function<void()>& sleep_late) {
  LateResult res;
  const uint64_t R = 50021;
  const uint32_t D = 8;
  auto plan = std::make_unique<std::unique_ptr<SparseAllreduce>>(make_scheme(scheme, c, TensorSpec{R * D, D, DType::F32}));
  auto idx = std::make_unique<std::vector<int64_t>>();
  for (int64_t r = c.rank(); r < static_cast<int64_t>(R); r += 7) idx->push_back(r);
  auto val = std::make_unique<std::vector<float>>(idx->size() * D, 1.0f);
  auto dense = std::make_unique<std::vector<float>>(dense_out ? R * D : 0);
  auto out = std::make_unique<SparseTensor>();
  SparseView v;
  v.dense_len = R * D;
  v.row_width = D;
  v.nnz = idx->size();
  v.indices = idx->data();
  v.values = val->data();
  if (c.rank() == late) sleep_late();
  try {
    if (dense_out) (*plan)->run_dense(v, dense->data());
    else (*plan)->run(v, *out);
  } catch (const Error& e) {
    res.threw = true;
    res.code = e.code();
    res.what = e.what();
  }
  // Free everything the call touched: the plan (and its workspace, unless the communicator keeps
  // it), the input and the output.
  plan.reset();
  idx.reset();
  val.reset();
  dense.reset();
  out.reset();
  return res;
}

inline const std::vector<std::string>& safety_schemes() {
  static const std::vector<std::string> v{"balanced", "allgather", "sparse_ps", "dense", "dense_native"};
  return v;
}

}  // namespace zen::reltest
