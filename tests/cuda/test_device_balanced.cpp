// Balanced Parallelism on the GPU vs the CPU scheme, bit for bit, over the device loopback
// (n virtual ranks on one GPU) and a one-rank NCCL communicator. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <set>

#include "gpu_test_util.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/cuda/balanced.hpp"
#include "zen/schemes/scheme.hpp"

using namespace zen;
using zen::test::DevBuf;

namespace {

struct Case {
  uint64_t rows;
  uint32_t D;
  double density;  // < 0: exactly one row per rank
  bool duplicates; // then values are small integers (exact sums in any order)
};

SparseTensor make_input(const Case& c, DType t, int r, uint64_t seed) {
  SparseTensor s(c.rows * c.D, t, c.D);
  std::mt19937_64 g(seed * 1000003 + r);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int64_t> idx;
  if (c.density < 0) {
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

struct RunCfg {
  PullEncoding pull = PullEncoding::Auto;
  bool dense_input = false;
  bool i32 = false;
};

// CPU expectation: the CPU scheme over the host loopback.
std::vector<std::vector<uint8_t>> cpu_expect(int n, const Case& c, DType t, const RunCfg& rc, uint64_t seed,
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
      std::vector<uint8_t> dense(c.rows * c.D * dtype_size(t), 0);
      scatter_add(in.view(), dense.data());
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

std::vector<std::vector<uint8_t>> gpu_run(int n, const Case& c, DType t, const RunCfg& rc, uint64_t seed,
                                          std::vector<std::string>* encodings = nullptr) {
  std::vector<std::vector<uint8_t>> out(n);
  if (encodings) encodings->assign(n, "");
  cuda::loopback::run(n, [&](Communicator& comm) {
    SparseTensor in = make_input(c, t, comm.rank(), seed);
    SchemeOptions o;
    o.seed = seed;
    o.pull = rc.pull;
    const size_t vbytes = c.rows * c.D * dtype_size(t);
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = std::max<size_t>(in.nnz(), 1) + (rc.dense_input ? c.rows : 0);
    cuda::DeviceBalanced db(comm, TensorSpec{c.rows * c.D, c.D, t}, o, lim);
    DevBuf d_out(vbytes + 1);
    d_out.fill(0x5A);
    if (rc.dense_input) {
      std::vector<uint8_t> dense(vbytes, 0);
      scatter_add(in.view(), dense.data());
      DevBuf d_grad = DevBuf::from(dense);
      db.run_dense_from_dense(d_grad.get(), d_out.get());
      db.synchronize();
    } else {
      DevBuf d_idx, d_val = DevBuf::from(in.values);
      if (rc.i32) {
        std::vector<int32_t> i32(in.indices.begin(), in.indices.end());
        d_idx = DevBuf::from(i32);
      } else {
        d_idx = DevBuf::from(in.indices);
      }
      SparseView v;
      v.dense_len = c.rows * c.D;
      v.row_width = c.D;
      v.nnz = in.nnz();
      v.index_type = rc.i32 ? IndexType::I32 : IndexType::I64;
      v.indices = d_idx.get();
      v.dtype = t;
      v.values = d_val.get();
      v.space = MemSpace::Device;
      db.run_dense(v, d_out.get());
      db.synchronize();
    }
    auto h = d_out.to_vector<uint8_t>(vbytes + 1);
    if (h.back() != 0x5A) ZEN_THROW(Result::InternalError, "device balanced wrote past the dense output");
    h.pop_back();
    out[comm.rank()] = std::move(h);
    if (encodings) (*encodings)[comm.rank()] = db.report().encoding;
  });
  return out;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {1, 1, 1.0, false},     {31, 1, 0.3, false},     {1000, 1, -1, false},   {1000, 1, 0.0, false},
      {1003, 3, 0.01, false}, {100003, 1, 0.001, false}, {100003, 1, 0.01, false}, {20011, 2, 0.5, false},
      {4099, 1, 1.0, false},  {5003, 1, 0.2, true},
  };
  return c;
}

}  // namespace

class DeviceBalancedMatrix : public ::testing::TestWithParam<int> {};

TEST_P(DeviceBalancedMatrix, BitIdenticalToCpu) {
  ZEN_REQUIRE_GPU();
  const int n = GetParam();
  for (size_t ci = 0; ci < cases().size(); ++ci)
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
      const Case& c = cases()[ci];
      RunCfg rc;
      rc.i32 = ci % 2 == 1;
      SCOPED_TRACE("n=" + std::to_string(n) + " case " + std::to_string(ci) + " rows=" + std::to_string(c.rows) +
                   " D=" + std::to_string(c.D) + " " + dtype_name(t));
      std::vector<std::string> ecpu, egpu;
      auto want = cpu_expect(n, c, t, rc, 40 + ci, &ecpu);
      auto got = gpu_run(n, c, t, rc, 40 + ci, &egpu);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(got[r].size(), want[r].size());
        ASSERT_EQ(0, std::memcmp(got[r].data(), want[r].data(), want[r].size())) << "rank " << r;
        // The device chooses between COO and the bitmap; the CPU plan may also choose Elias-Fano
        // ("ef", or "mixed" with it), where only the values can be compared.
        if (ecpu[r] == "coo" || ecpu[r] == "bitmap") EXPECT_EQ(egpu[r], ecpu[r]) << "pull encoding choice differs, rank " << r;
        else EXPECT_TRUE(egpu[r] == "coo" || egpu[r] == "bitmap" || egpu[r] == "mixed") << egpu[r] << ", rank " << r;
      }
    }
}
INSTANTIATE_TEST_SUITE_P(Ranks, DeviceBalancedMatrix, ::testing::Values(1, 2, 3, 5, 8));

TEST(DeviceBalanced, ForcedPullEncodingsAndDenseInput) {
  ZEN_REQUIRE_GPU();
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
          auto got = gpu_run(n, c, t, rc, 7);
          for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], want[r]) << "rank " << r;
        }
}

TEST(DeviceBalanced, OneRankNccl) {
  ZEN_REQUIRE_GPU();
  if (!cuda::nccl::available()) GTEST_SKIP() << "built without NCCL";
  Case c{100003, 1, 0.02, false};
  RunCfg rc;
  auto want = cpu_expect(1, c, DType::F32, rc, 3);
  auto comm = cuda::nccl::create(cuda::nccl::unique_id(), 1, 0);
  cudaStream_t s;
  ZEN_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  comm->set_stream(s);
  {
    SparseTensor in = make_input(c, DType::F32, 0, 3);
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = in.nnz();
    DevBuf d_idx = DevBuf::from(in.indices), d_val = DevBuf::from(in.values), d_out(c.rows * 4);
    SparseView v = in.view();
    v.indices = d_idx.get();
    v.values = d_val.get();
    v.space = MemSpace::Device;
    SchemeOptions o;
    o.seed = 3;
    cuda::DeviceBalanced db3(*comm, TensorSpec{c.rows, 1, DType::F32}, o, lim);
    db3.run_dense(v, d_out.get());
    db3.synchronize();
    EXPECT_EQ(d_out.to_vector<uint8_t>(c.rows * 4), want[0]);
  }
  comm.reset();
  cudaStreamDestroy(s);
}

TEST(DeviceBalanced, LimitsAndMisuseAreReported) {
  ZEN_REQUIRE_GPU();
  // Input larger than max_nnz.
  auto errs = cuda::loopback::run_collect(2, [](Communicator& comm) {
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = 2;
    cuda::DeviceBalanced db(comm, TensorSpec{100, 1, DType::F32}, SchemeOptions{}, lim);
    std::vector<int64_t> idx{1, 2, 3};
    std::vector<float> val{1, 2, 3};
    DevBuf di = DevBuf::from(idx), dv = DevBuf::from(val), out(400);
    SparseView v;
    v.dense_len = 100;
    v.nnz = 3;
    v.indices = di.get();
    v.values = dv.get();
    v.space = MemSpace::Device;
    db.run_dense(v, out.get());
  });
  ASSERT_TRUE(errs[0]);
  try {
    std::rethrow_exception(errs[0]);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("max_nnz 2"), std::string::npos) << e.what();
  }
  // An index outside [0, N) is reported (InvalidArgument, naming it) at the first synchronization.
  errs = cuda::loopback::run_collect(2, [](Communicator& comm) {
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = 4;
    cuda::DeviceBalanced db(comm, TensorSpec{100, 1, DType::F32}, SchemeOptions{}, lim);
    std::vector<int64_t> idx{1, comm.rank() == 0 ? 100 : 2};
    std::vector<float> val{1, 2};
    DevBuf di = DevBuf::from(idx), dv = DevBuf::from(val), out(400);
    SparseView v;
    v.dense_len = 100;
    v.nnz = 2;
    v.indices = di.get();
    v.values = dv.get();
    v.space = MemSpace::Device;
    db.run_dense(v, out.get());
  });
  ASSERT_TRUE(errs[0]);
  try {
    std::rethrow_exception(errs[0]);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("index 100"), std::string::npos) << e.what();
  }
  // Ranks disagreeing on N fail at setup, naming the other rank's N.
  errs = cuda::loopback::run_collect(2, [](Communicator& comm) {
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = 4;
    cuda::DeviceBalanced db(comm, TensorSpec{comm.rank() == 0 ? 100u : 101u, 1, DType::F32}, SchemeOptions{}, lim);
  });
  ASSERT_TRUE(errs[0]);
  try {
    std::rethrow_exception(errs[0]);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("N=101"), std::string::npos) << e.what();
  }
  // A workspace smaller than the query is refused.
  errs = cuda::loopback::run_collect(1, [](Communicator& comm) {
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = 1000;
    const TensorSpec spec{1 << 20, 1, DType::F32};
    const size_t need = cuda::DeviceBalanced::workspace_bytes(spec, 1, SchemeOptions{}, lim);
    DevBuf ws(need / 2);
    cuda::DeviceBalanced db(comm, spec, SchemeOptions{}, lim, ws.get(), ws.size());
  });
  ASSERT_TRUE(errs[0]);
}
