#pragma once
// DeviceBalanced vs the CPU Balanced scheme, bit for bit, on zen::test::TestBackend (define it, and
// the rank counts kBalancedRanks, before including): cuda::Host runs the device plan's kernels on
// the CPU over the host loopback, cuda::Gpu on one GPU over the device loopback.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "device_test_util.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/cuda/balanced.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::test::balanced {

using B = TestBackend;
using DBuf = Buf<B>;
using R = Ranks<B>;

struct Case {
  uint64_t rows;
  uint32_t D;
  double density;   // < 0: exactly one row per rank
  bool duplicates;  // then values are small integers (exact sums in any order)
  bool rank0_one_row = false;  // rank 0 holds a single row whatever the density
};

inline SparseTensor make_input(const Case& c, DType t, int r, uint64_t seed) {
  SparseTensor s(c.rows * c.D, t, c.D);
  std::mt19937_64 g(seed * 1000003 + r);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int64_t> idx;
  if (c.density < 0 || (c.rank0_one_row && r == 0)) {
    if (c.rows) idx.push_back(static_cast<int64_t>(g() % c.rows));
  } else {
    for (uint64_t q = 0; q < c.rows; ++q)
      if (u(g) < c.density || (q % 5 == 1 && u(g) < 4 * c.density)) idx.push_back(static_cast<int64_t>(q));
    if (c.rows && c.density > 0) {
      if (r == 0 && (idx.empty() || idx.front() != 0)) idx.insert(idx.begin(), 0);
      if (idx.empty() || idx.back() != static_cast<int64_t>(c.rows - 1)) idx.push_back(static_cast<int64_t>(c.rows - 1));
    }
  }
  if (c.duplicates)
    for (size_t i = 0, k = idx.size(); i < k; i += 3) idx.push_back(idx[i]);
  std::shuffle(idx.begin(), idx.end(), g);
  s.resize(idx.size());
  s.indices = idx;
  std::uniform_int_distribution<int> iv(-6, 6);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T* v = s.vals<T>();
    for (size_t i = 0; i < idx.size() * c.D; ++i) v[i] = static_cast<T>(c.duplicates ? iv(g) : (u(g) * 2 - 1) * 5);
    // exact cancellation on row 0 between rank 0 and rank 1 (union support keeps it)
    for (size_t i = 0; i < idx.size(); ++i)
      if (idx[i] == 0 && (r == 0 || r == 1))
        for (uint32_t k = 0; k < c.D; ++k) v[i * c.D + k] = static_cast<T>(r == 0 ? 0.75 : -0.75);
  });
  return s;
}

// The dense image of a rank's input (duplicates summed); its rows without a value != 0 are no input.
inline std::vector<uint8_t> dense_image(const SparseTensor& in) {
  std::vector<uint8_t> dense(in.dense_len * dtype_size(in.dtype), 0);
  scatter_add(in.view(), dense.data());
  return dense;
}

struct RunCfg {
  PullEncoding pull = PullEncoding::Auto;
  bool dense_input = false;
  bool i32 = false;
  bool tight_limits = false;  // each rank's max_nnz = its own nnz; recv_capacity / pull_rows default
};

// CPU expectation: the CPU scheme over the host loopback.
inline std::vector<std::vector<uint8_t>> cpu_expect(int n, const Case& c, DType t, const RunCfg& rc, uint64_t seed,
                                                    std::vector<std::string>* encodings = nullptr) {
  std::vector<std::vector<uint8_t>> out(n);
  if (encodings) encodings->assign(n, "");
  loopback::run(n, [&](Communicator& comm) {
    SparseTensor in = make_input(c, t, comm.rank(), seed);
    SchemeOptions o;
    o.seed = seed;
    o.pull = rc.pull;
    o.push = IndexEncoding::Coo;  // as the device pushes
    o.threads = 1;
    auto s = make_scheme("balanced", comm, TensorSpec{c.rows * c.D, c.D, t}, o);
    std::vector<uint8_t> d(c.rows * c.D * dtype_size(t) + 1);
    if (rc.dense_input) {
      // dense input = the coalesced tensor's dense image; rows that are all zero are not inputs
      const std::vector<uint8_t> dense = dense_image(in);
      SparseTensor nz = dense_to_sparse(dense.data(), c.rows * c.D, t, c.D);
      s->run_dense(nz.view(), d.data());
    } else {
      s->run_dense(in.view(), d.data());
    }
    d.pop_back();
    out[comm.rank()] = std::move(d);
    if (encodings) (*encodings)[comm.rank()] = s->report().encoding;
  });
  return out;
}

inline std::vector<std::vector<uint8_t>> device_run(int n, const Case& c, DType t, const RunCfg& rc, uint64_t seed,
                                                    std::vector<std::string>* encodings = nullptr) {
  std::vector<std::vector<uint8_t>> out(n);
  if (encodings) encodings->assign(n, "");
  R::run(n, [&](Communicator& comm) {
    SparseTensor in = make_input(c, t, comm.rank(), seed);
    SchemeOptions o;
    o.seed = seed;
    o.pull = rc.pull;
    const size_t vbytes = c.rows * c.D * dtype_size(t);
    cuda::DeviceBalancedLimits lim;
    if (rc.tight_limits) {
      const std::vector<uint8_t> dense = dense_image(in);
      lim.max_nnz = rc.dense_input ? dense_to_sparse(dense.data(), c.rows * c.D, t, c.D).nnz() : in.nnz();
    } else {
      lim.max_nnz = std::max<size_t>(in.nnz(), 1) + (rc.dense_input ? c.rows : 0);
    }
    cuda::DeviceBalanced db(comm, TensorSpec{c.rows * c.D, c.D, t}, o, lim);
    EXPECT_EQ(db.memory_space(), R::space);
    DBuf d_out(vbytes + 1);
    d_out.fill(0x5A);
    if (rc.dense_input) {
      DBuf d_grad = DBuf::from(dense_image(in));
      db.run_dense_from_dense(d_grad.get(), d_out.get());
      db.synchronize();
    } else {
      DBuf d_idx, d_val = DBuf::from(in.values);
      if (rc.i32) {
        std::vector<int32_t> i32(in.indices.begin(), in.indices.end());
        d_idx = DBuf::from(i32);
      } else {
        d_idx = DBuf::from(in.indices);
      }
      SparseView v;
      v.dense_len = c.rows * c.D;
      v.row_width = c.D;
      v.nnz = in.nnz();
      v.index_type = rc.i32 ? IndexType::I32 : IndexType::I64;
      v.indices = d_idx.get();
      v.dtype = t;
      v.values = d_val.get();
      v.space = R::space;
      db.run_dense(v, d_out.get());
      db.synchronize();
    }
    auto h = d_out.template to_vector<uint8_t>(vbytes + 1);
    if (h.back() != 0x5A) ZEN_THROW(Result::InternalError, "device balanced wrote past the dense output");
    h.pop_back();
    out[comm.rank()] = std::move(h);
    if (encodings) (*encodings)[comm.rank()] = db.report().encoding;
  });
  return out;
}

inline const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {1, 1, 1.0, false},     {31, 1, 0.3, false},       {1000, 1, -1, false},      {1000, 1, 0.0, false},
      {1003, 3, 0.01, false}, {100003, 1, 0.001, false}, {100003, 1, 0.01, false},  {20011, 2, 0.5, false},
      {4099, 1, 1.0, false},  {5003, 1, 0.2, true},
  };
  return c;
}

class DeviceBalancedMatrix : public ::testing::TestWithParam<int> {};

// Every case x dtype x both index widths (each case runs with int32 and with int64 indices).
TEST_P(DeviceBalancedMatrix, BitIdenticalToCpu) {
  ZEN_REQUIRE_BACKEND();
  const int n = GetParam();
  for (size_t ci = 0; ci < cases().size(); ++ci)
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64})
      for (bool i32 : {false, true}) {
        const Case& c = cases()[ci];
        RunCfg rc;
        rc.i32 = i32;
        SCOPED_TRACE("n=" + std::to_string(n) + " case " + std::to_string(ci) + " rows=" + std::to_string(c.rows) +
                     " D=" + std::to_string(c.D) + " " + dtype_name(t) + (i32 ? " int32" : " int64"));
        std::vector<std::string> ecpu, edev;
        auto want = cpu_expect(n, c, t, rc, 40 + ci, &ecpu);
        auto got = device_run(n, c, t, rc, 40 + ci, &edev);
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(got[r].size(), want[r].size());
          ASSERT_EQ(0, std::memcmp(got[r].data(), want[r].data(), want[r].size())) << "rank " << r;
          // The device chooses between COO and the bitmap; the CPU plan may also choose Elias-Fano
          // ("ef", or "mixed" with it), where only the values can be compared.
          if (ecpu[r] == "coo" || ecpu[r] == "bitmap") { EXPECT_EQ(edev[r], ecpu[r]) << "pull encoding choice differs, rank " << r; }
          else EXPECT_TRUE(edev[r] == "coo" || edev[r] == "bitmap" || edev[r] == "mixed") << edev[r] << ", rank " << r;
        }
      }
}

TEST(DeviceBalanced, ForcedPullEncodingsAndDenseInput) {
  ZEN_REQUIRE_BACKEND();
  for (int n : {3, 8})
    for (PullEncoding pe : {PullEncoding::Coo, PullEncoding::Bitmap, PullEncoding::Auto})
      for (bool dense : {false, true})
        for (DType t : {DType::F32, DType::BF16}) {
          Case c{30011, 2, 0.05, false};
          RunCfg rc;
          rc.pull = pe;
          rc.dense_input = dense;
          SCOPED_TRACE("n=" + std::to_string(n) + " pull " + std::to_string(static_cast<int>(pe)) + " dense " +
                       std::to_string(dense) + " " + dtype_name(t));
          auto want = cpu_expect(n, c, t, rc, 7);
          auto got = device_run(n, c, t, rc, 7);
          for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], want[r]) << "rank " << r;
        }
}

// Limits are agreed across ranks at setup: every rank sizes its receive and pull buffers for what
// its peers can send (the sum of all ranks' max_nnz), so a rank whose own max_nnz is small (here
// rank 0 holds one row while the others hold thousands) neither throws nor truncates.
TEST(DeviceBalanced, LimitsAreAgreedAcrossRanks) {
  ZEN_REQUIRE_BACKEND();
  for (int n : {5, 8})
    for (bool dense : {false, true}) {
      SCOPED_TRACE("n=" + std::to_string(n) + (dense ? " dense input" : " sparse input"));
      Case c{20011, 1, 0.3, false, true};
      RunCfg rc;
      rc.tight_limits = true;
      rc.dense_input = dense;
      auto want = cpu_expect(n, c, DType::F32, rc, 11);
      auto got = device_run(n, c, DType::F32, rc, 11);
      for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], want[r]) << "rank " << r;
      // And the agreed values are what every rank reports.
      std::vector<cuda::DeviceBalancedLimits> agreed(n);
      R::run(n, [&](Communicator& comm) {
        cuda::DeviceBalancedLimits lim;
        lim.max_nnz = comm.rank() == 0 ? 1 : 1000 + comm.rank();
        if (comm.rank() == 2) lim.pull_rows = 20011;  // an explicit, larger request wins everywhere
        cuda::DeviceBalanced db(comm, TensorSpec{20011, 1, DType::F32}, SchemeOptions{}, lim);
        agreed[comm.rank()] = db.limits();
      });
      size_t sum = 1;
      for (int r = 1; r < n; ++r) sum += 1000 + r;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(agreed[r].max_nnz, r == 0 ? 1u : 1000u + r) << "rank " << r;
        EXPECT_EQ(agreed[r].recv_capacity, sum) << "rank " << r;
        EXPECT_EQ(agreed[r].pull_rows, 20011u) << "rank " << r;
      }
    }
}

TEST(DeviceBalanced, LimitsAndMisuseAreReported) {
  ZEN_REQUIRE_BACKEND();
  auto make_view = [](const DBuf& di, const DBuf& dv, size_t nnz) {
    SparseView v;
    v.dense_len = 100;
    v.nnz = nnz;
    v.indices = di.get();
    v.values = dv.get();
    v.space = R::space;
    return v;
  };
  // The original error (not a peer's RemoteError echo) of the first rank that failed by itself.
  auto first_error = [](const std::vector<std::exception_ptr>& errs, Result code, const std::string& needle) {
    bool found = false;
    for (const auto& ep : errs) {
      if (!ep || found) continue;
      try {
        std::rethrow_exception(ep);
      } catch (const Error& e) {
        if (e.code() == Result::RemoteError) continue;
        found = true;
        EXPECT_EQ(e.code(), code) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    }
    EXPECT_TRUE(found) << "no rank failed with its own error";
  };
  // Input larger than max_nnz.
  first_error(R::run_collect(2, [&](Communicator& comm) {
                cuda::DeviceBalancedLimits lim;
                lim.max_nnz = 2;
                cuda::DeviceBalanced db(comm, TensorSpec{100, 1, DType::F32}, SchemeOptions{}, lim);
                std::vector<int64_t> idx{1, 2, 3};
                std::vector<float> val{1, 2, 3};
                DBuf di = DBuf::from(idx), dv = DBuf::from(val), out(400);
                db.run_dense(make_view(di, dv, 3), out.get());
              }),
              Result::InvalidArgument, "max_nnz 2");
  // An index outside [0, N) is reported (InvalidArgument, naming it) at the first synchronization.
  first_error(R::run_collect(2, [&](Communicator& comm) {
                cuda::DeviceBalancedLimits lim;
                lim.max_nnz = 4;
                cuda::DeviceBalanced db(comm, TensorSpec{100, 1, DType::F32}, SchemeOptions{}, lim);
                std::vector<int64_t> idx{1, comm.rank() == 0 ? 100 : 2};
                std::vector<float> val{1, 2};
                DBuf di = DBuf::from(idx), dv = DBuf::from(val), out(400);
                db.run_dense(make_view(di, dv, 2), out.get());
              }),
              Result::InvalidArgument, "index 100");
  // An explicit recv_capacity below what the push delivers, on every rank: named, not overrun.
  first_error(R::run_collect(3, [&](Communicator& comm) {
                cuda::DeviceBalancedLimits lim;
                lim.max_nnz = 100;
                lim.recv_capacity = 5;
                cuda::DeviceBalanced db(comm, TensorSpec{100, 1, DType::F32}, SchemeOptions{}, lim);
                std::vector<int64_t> idx(100);
                std::iota(idx.begin(), idx.end(), 0);
                std::vector<float> val(100, 1.0f);
                DBuf di = DBuf::from(idx), dv = DBuf::from(val), out(400);
                db.run_dense(make_view(di, dv, 100), out.get());
              }),
              Result::InvalidArgument, "recv_capacity 5");
  // Ranks disagreeing on N fail at setup, naming the other rank's N.
  first_error(R::run_collect(2, [&](Communicator& comm) {
                cuda::DeviceBalancedLimits lim;
                lim.max_nnz = 4;
                cuda::DeviceBalanced db(comm, TensorSpec{comm.rank() == 0 ? 100u : 101u, 1, DType::F32}, SchemeOptions{},
                                        lim);
              }),
              Result::InvalidUsage, "N=101");
  // A workspace smaller than the query is refused.
  first_error(R::run_collect(1, [&](Communicator& comm) {
                cuda::DeviceBalancedLimits lim;
                lim.max_nnz = 1000;
                const TensorSpec spec{1 << 20, 1, DType::F32};
                const size_t need = cuda::DeviceBalanced::workspace_bytes(spec, 1, SchemeOptions{}, lim, R::space);
                DBuf ws(need / 2);
                cuda::DeviceBalanced db(comm, spec, SchemeOptions{}, lim, ws.get(), ws.size());
              }),
              Result::InvalidArgument, "workspace of");
  // The query's size is enough.
  R::run(2, [&](Communicator& comm) {
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = 1000;
    const TensorSpec spec{1 << 20, 1, DType::F32};
    const size_t need = cuda::DeviceBalanced::workspace_bytes(spec, 2, SchemeOptions{}, lim, R::space);
    DBuf ws(need);
    cuda::DeviceBalanced db(comm, spec, SchemeOptions{}, lim, ws.get(), ws.size());
  });
  // Device plans offer dense output only.
  first_error(R::run_collect(1, [&](Communicator& comm) {
                cuda::DeviceBalancedLimits lim;
                lim.max_nnz = 4;
                cuda::DeviceBalanced db(comm, TensorSpec{100, 1, DType::F32}, SchemeOptions{}, lim);
                SparseTensor out;
                db.run(SparseView{}, out);
              }),
              Result::Unsupported, "run_dense");
}

}  // namespace zen::test::balanced
