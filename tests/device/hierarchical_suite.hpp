#pragma once
// DeviceHierarchical (simulated nodes) vs the host hierarchical scheme on the same non-zero rows,
// bit for bit, on zen::test::TestBackend (define it before including: cuda::Host runs the device
// plan's kernels on the CPU over host-loopback sub-communicators, cuda::Gpu over the device loopback).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "device_test_util.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/cuda/hierarchical.hpp"
#include "zen/schemes/hierarchical.hpp"

namespace zen::test::hierarchical {

using B = TestBackend;
using DBuf = Buf<B>;
using R = Ranks<B>;

struct Shape {
  uint64_t rows;
  uint32_t D;
  double density;
};

// Rank r's dense gradient: shared hot rows (overlap), private rows, an all -0.0 row (counts as zero),
// and a pair of ranks cancelling exactly on row 1.
inline std::vector<uint8_t> make_dense(const Shape& s, DType t, int r, int n, uint64_t seed) {
  std::vector<uint8_t> d(s.rows * s.D * dtype_size(t), 0);
  std::mt19937_64 g(seed * 7919 + r);
  std::uniform_real_distribution<double> u(0, 1);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T* v = reinterpret_cast<T*>(d.data());
    for (uint64_t q = 0; q < s.rows; ++q) {
      const bool hot = q % 3 == 0 && u(g) < 0.7;
      if (!(hot || u(g) < s.density)) continue;
      for (uint32_t c = 0; c < s.D; ++c) v[q * s.D + c] = static_cast<T>((u(g) * 2 - 1) * 9);
    }
    if (s.rows > 2) {
      for (uint32_t c = 0; c < s.D; ++c) v[1 * s.D + c] = static_cast<T>(r == 0 ? 2.5 : (r == n - 1 ? -2.5 : 0.0));
      for (uint32_t c = 0; c < s.D; ++c) v[(s.rows - 1) * s.D + c] = static_cast<T>(-0.0);  // an all -0.0 row is absent
    }
  });
  return d;
}

TEST(DeviceHierarchical, MatchesHostHierarchicalBitForBit) {
  ZEN_REQUIRE_BACKEND();
  const std::vector<Shape> shapes{{7, 1, 1.0}, {1003, 1, 0.05}, {2001, 2, 0.3}};
  for (int n : {2, 4, 6, 8})
    for (int L = 1; L <= n; ++L) {
      if (n % L) continue;
      for (size_t si = 0; si < shapes.size(); ++si)
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
          const Shape& s = shapes[si];
          const TensorSpec spec{s.rows * s.D, s.D, t};
          SCOPED_TRACE("n=" + std::to_string(n) + " L=" + std::to_string(L) + " rows=" + std::to_string(s.rows) + " " +
                       dtype_name(t));
          SchemeOptions opt;
          opt.seed = 17 + si;
          opt.threads = 1;
          std::vector<std::vector<uint8_t>> want(n), got(n);
          loopback::run(n, [&](Communicator& c) {
            auto dense = make_dense(s, t, c.rank(), n, si);
            SparseTensor in = dense_to_sparse(dense.data(), spec.dense_len, t, s.D);
            auto h = make_hierarchical(c, spec, opt, HierarchicalOptions{L, "balanced"});
            want[c.rank()].resize(dense.size());
            h->run_dense(in.view(), want[c.rank()].data());
          });
          R::run_nodes(n, L, [&](Communicator& w, Communicator& intra, Communicator& inter) {
            EXPECT_EQ(intra.size(), L);
            EXPECT_EQ(inter.size(), n / L);
            auto dense = make_dense(s, t, w.rank(), n, si);
            DBuf d_grad = DBuf::from(dense), d_out(dense.size());
            cuda::DeviceHierarchical dh(intra, inter, spec, opt);
            dh.run_dense_from_dense(d_grad.get(), d_out.get());
            dh.synchronize();
            got[w.rank()] = d_out.template to_vector<uint8_t>(dense.size());
          });
          for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], want[r]) << "rank " << r;
        }
    }
}

TEST(DeviceHierarchical, SparseInputIsRefused) {
  ZEN_REQUIRE_BACKEND();
  R::run_nodes(2, 1, [&](Communicator&, Communicator& intra, Communicator& inter) {
    cuda::DeviceHierarchical dh(intra, inter, TensorSpec{10, 1, DType::F32});
    try {
      dh.run_dense(SparseView{}, nullptr);
      ADD_FAILURE() << "sparse input accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::Unsupported) << e.what();
    }
  });
}

}  // namespace zen::test::hierarchical
