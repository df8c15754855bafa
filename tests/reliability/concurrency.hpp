#pragma once
// Concurrency tests (docs/api.md, "Concurrency"), shared by the loopback and MPI binaries: plans
// driven from their own threads, on one communicator in agreed order and on several communicators,
// with requests started, tested and waited in orders that differ from rank to rank. Every result is
// checked against an exact reference computed here (a std::map sum of every rank's input).
//
// Inputs depend only on (plan, call number, rank), so every rank agrees on what call k of plan p
// sums; the timing, the mix of blocking and non-blocking calls, the number of requests in flight and
// the order of test() / wait() come from a generator seeded with the rank, so they differ per rank.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"

namespace zen::conctest {

struct PlanSpec {
  std::string scheme;
  TensorSpec spec;
  bool dense_out = false;
};

/// The plans of one driver set: different schemes, sizes (N not divisible by the rank count),
/// row widths, dtypes and output forms.
inline std::vector<PlanSpec> plan_specs() {
  return {{"balanced", TensorSpec{5003, 1, DType::F32}, false},
          {"allgather", TensorSpec{3002, 2, DType::F64}, true},
          {"sparse_ps", TensorSpec{4099, 1, DType::BF16}, false},
          {"dense_native", TensorSpec{2001, 3, DType::F32}, true}};
}

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Rank r's input of call `call` of plan `plan`: distinct rows (index 0 and the last row on some
/// calls, an empty input on some), values small integers (exact in every dtype).
struct Input {
  std::vector<int64_t> idx;
  std::vector<uint8_t> vals;
  SparseView view(const TensorSpec& s) const {
    SparseView v;
    v.dense_len = s.dense_len;
    v.row_width = s.row_width;
    v.dtype = s.dtype;
    v.nnz = idx.size();
    v.indices = idx.data();
    v.values = vals.data();
    return v;
  }
};

inline Input make_input(const PlanSpec& p, uint64_t plan, uint64_t call, int r) {
  std::mt19937_64 g(mix(plan * 1000003 + call * 7919 + static_cast<uint64_t>(r) * 104729 + 17));
  const uint64_t rows = p.spec.dense_len / p.spec.row_width;
  Input in;
  if (call % 7 == 3 && r == 1) return in;  // an empty rank now and then
  const uint64_t k = 1 + g() % std::min<uint64_t>(rows, call % 5 == 0 ? rows : 200);
  for (uint64_t i = 0; i < k; ++i) in.idx.push_back(static_cast<int64_t>(g() % rows));
  if (call % 3 == 0) in.idx.push_back(0);
  if (call % 4 == 1) in.idx.push_back(static_cast<int64_t>(rows - 1));
  std::sort(in.idx.begin(), in.idx.end());
  in.idx.erase(std::unique(in.idx.begin(), in.idx.end()), in.idx.end());
  std::shuffle(in.idx.begin(), in.idx.end(), g);
  const size_t m = in.idx.size() * p.spec.row_width, vs = dtype_size(p.spec.dtype);
  in.vals.resize(m * vs);
  dispatch_dtype(p.spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < m; ++i) {
      const T x = static_cast<T>(static_cast<float>(static_cast<int>(g() % 9) - 4));
      std::memcpy(in.vals.data() + i * vs, &x, vs);
    }
  });
  return in;
}

/// Exact reference of call `call` of plan `plan` over n ranks: row -> column sums.
inline std::map<int64_t, std::vector<double>> reference(const PlanSpec& p, uint64_t plan, uint64_t call, int n) {
  std::map<int64_t, std::vector<double>> sum;
  const size_t D = p.spec.row_width, vs = dtype_size(p.spec.dtype);
  for (int r = 0; r < n; ++r) {
    const Input in = make_input(p, plan, call, r);
    for (size_t i = 0; i < in.idx.size(); ++i) {
      auto& row = sum[in.idx[i]];
      row.resize(D, 0.0);
      dispatch_dtype(p.spec.dtype, [&](auto tag) {
        using T = decltype(tag);
        for (size_t c = 0; c < D; ++c) {
          T x;
          std::memcpy(&x, in.vals.data() + (i * D + c) * vs, vs);
          row[c] += static_cast<double>(static_cast<float>(x));
        }
      });
    }
  }
  return sum;
}

/// Elements of a result that differ from the reference (sparse: rows and values; dense: every element).
inline uint64_t wrong_elements(const PlanSpec& p, const std::map<int64_t, std::vector<double>>& ref,
                               const SparseTensor* sparse, const std::vector<uint8_t>* dense) {
  const size_t D = p.spec.row_width, vs = dtype_size(p.spec.dtype);
  uint64_t bad = 0;
  auto value = [&](const uint8_t* at) {
    return dispatch_dtype(p.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      T x;
      std::memcpy(&x, at, vs);
      return static_cast<double>(static_cast<float>(x));
    });
  };
  if (sparse) {
    if (sparse->nnz() != ref.size()) return std::max<uint64_t>(1, ref.size() * D);
    size_t k = 0;
    for (const auto& [row, s] : ref) {
      if (sparse->indices[k] != row) return ref.size() * D;
      for (size_t c = 0; c < D; ++c) bad += value(sparse->values.data() + (k * D + c) * vs) != s[c];
      ++k;
    }
    return bad;
  }
  const uint64_t rows = p.spec.dense_len / D;
  auto it = ref.begin();
  for (uint64_t row = 0; row < rows; ++row) {
    const bool in = it != ref.end() && it->first == static_cast<int64_t>(row);
    for (size_t c = 0; c < D; ++c) bad += value(dense->data() + (row * D + c) * vs) != (in ? it->second[c] : 0.0);
    if (in) ++it;
  }
  return bad;
}

struct DriveResult {
  uint64_t calls = 0, nonblocking = 0, tests = 0, wrong = 0;
  std::string error;  // first exception, if any (the driver stops there)
};

/// Drive `plan` (plan number `pid` of `specs`) from this thread for `calls` calls on rank r of n:
/// batches of 1..3 requests in flight (blocking calls mixed in), completed by test() and wait() in
/// a random order, every result checked. `rank_seed` makes the order differ per rank.
inline DriveResult drive(SparseAllreduce& plan, const PlanSpec& ps, uint64_t pid, int r, int n, uint64_t calls,
                         uint64_t rank_seed) {
  DriveResult res;
  std::mt19937_64 g(mix(rank_seed * 31 + pid));
  auto coin = [&](double pr) { return std::uniform_real_distribution<double>(0, 1)(g) < pr; };
  struct Slot {
    uint64_t call;
    Input in;
    SparseTensor sparse;
    std::vector<uint8_t> dense;
    Request req;
    bool done = false;
  };
  try {
    for (uint64_t c = 0; c < calls;) {
      const uint64_t batch = std::min<uint64_t>(calls - c, 1 + g() % 3);
      std::vector<std::unique_ptr<Slot>> slots;
      for (uint64_t b = 0; b < batch; ++b, ++c) {
        auto s = std::make_unique<Slot>();
        s->call = c;
        s->in = make_input(ps, pid, c, r);
        if (ps.dense_out) s->dense.assign(ps.spec.dense_len * dtype_size(ps.spec.dtype), 0xAB);
        const SparseView v = s->in.view(ps.spec);
        if (coin(0.25)) {  // blocking: queued behind this rank's pending calls, in its agreed place
          if (ps.dense_out) plan.run_dense(v, s->dense.data());
          else plan.run(v, s->sparse);
          s->done = true;
        } else {
          s->req = ps.dense_out ? plan.start_dense(v, s->dense.data()) : plan.start(v, s->sparse);
          ++res.nonblocking;
        }
        if (coin(0.5)) std::this_thread::sleep_for(std::chrono::microseconds(g() % 3000));
        slots.push_back(std::move(s));
      }
      // Complete in a random order: test() a random pending one, or wait() on it.
      for (;;) {
        std::vector<Slot*> open;
        for (auto& s : slots)
          if (!s->done) open.push_back(s.get());
        if (open.empty()) break;
        Slot* s = open[g() % open.size()];
        if (coin(0.6)) {
          ++res.tests;
          if (s->req.test()) s->done = true;
          else std::this_thread::sleep_for(std::chrono::microseconds(g() % 500));
        } else {
          s->req.wait();
          s->done = true;
        }
      }
      for (auto& s : slots) {
        const auto ref = reference(ps, pid, s->call, n);
        res.wrong += wrong_elements(ps, ref, ps.dense_out ? nullptr : &s->sparse, ps.dense_out ? &s->dense : nullptr);
        ++res.calls;
      }
    }
  } catch (const std::exception& e) {
    res.error = e.what();
  }
  return res;
}

}  // namespace zen::conctest
