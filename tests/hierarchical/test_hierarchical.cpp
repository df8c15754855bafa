// Hierarchical mode on the loopback backend with simulated node boundaries (node size L | n).
#include <gtest/gtest.h>

#include "../core/comm_suite.hpp"
#include "hier_cases.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;
using zen::test::HierCase;

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int L = 1; L <= n; ++L)
    if (n % L == 0) d.push_back(L);
  return d;
}

const std::vector<HierCase>& cases() {
  static const std::vector<HierCase> c{
      {0, 1, 0.0, false, false},     {1, 1, 1.0, false, false},     {31, 1, 0.3, false, false},
      {1000, 1, 0.01, false, false}, {1003, 3, 0.2, false, false},  {4099, 1, 0.5, true, false},
      {2000, 2, 1.0, false, true},   {5, 1, 0.0, false, false},
  };
  return c;
}

template <typename T>
void sweep(int n) {
  for (int L : divisors(n))
    for (size_t ci = 0; ci < cases().size(); ++ci) {
      const HierCase hc = cases()[ci];
      SCOPED_TRACE("n=" + std::to_string(n) + " L=" + std::to_string(L) + " case " + std::to_string(ci));
      loopback::run(n, [&](Communicator& c) { test::check_hierarchical_rank<T>(c, nullptr, nullptr, L, hc, 11 + ci); });
    }
}

}  // namespace

class HierarchicalLoopback : public ::testing::TestWithParam<int> {};

TEST_P(HierarchicalLoopback, F32MatchesReferenceBitForBit) { sweep<float>(GetParam()); }
TEST_P(HierarchicalLoopback, F16MatchesReferenceBitForBit) { sweep<half>(GetParam()); }
TEST_P(HierarchicalLoopback, BF16MatchesReferenceBitForBit) { sweep<bfloat16>(GetParam()); }
TEST_P(HierarchicalLoopback, F64MatchesReferenceBitForBit) { sweep<double>(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ranks, HierarchicalLoopback, ::testing::Values(1, 2, 3, 4, 6, 8));

// With exactly representable sums every order agrees: the hierarchical result equals flat Balanced.
TEST(Hierarchical, EqualsFlatBalancedOnExactSums) {
  for (int n : {4, 6, 8}) {
    for (int L : {2, n / 2}) {
      loopback::run(n, [&](Communicator& c) {
        HierCase hc{3001, 1, 0.05, false, true};
        TensorSpec spec{hc.rows, 1, DType::F32};
        SparseTensor in = test::make_input<float>(hc, c.rank(), n, DType::F32, 5);
        SchemeOptions opt;
        opt.seed = 9;
        opt.threads = 1;
        auto flat = make_scheme("balanced", c, spec, opt);
        auto hier = make_hierarchical(c, spec, opt, HierarchicalOptions{L, "balanced"});
        SparseTensor a, b;
        flat->run(in.view(), a);
        hier->run(in.view(), b);
        test::expect_same_bits(b, a, "n=" + std::to_string(n) + " L=" + std::to_string(L));
        // Traffic of the three phases is accounted on the sub-communicators.
        ASSERT_EQ(hier->report().phases.size(), L == n ? 2u : 3u);
        EXPECT_GT(hier->report().sent, 0u);
      });
    }
  }
}

// Caller-provided sub-communicators (as an MPI_Comm_split would give) work the same way.
TEST(Hierarchical, ExplicitSubCommunicators) {
  const int n = 6, L = 3;
  loopback::run(n, [&](Communicator& c) {
    NodeComms nc = split_nodes(c, L);
    EXPECT_EQ(nc.intra->size(), L);
    EXPECT_EQ(nc.inter->size(), n / L);
    EXPECT_EQ(nc.intra->rank(), c.rank() % L);
    EXPECT_EQ(nc.inter->rank(), c.rank() / L);
    test::check_hierarchical_rank<float>(c, nc.intra.get(), nc.inter.get(), L, HierCase{777, 2, 0.1, false, false}, 3);
  });
}

// The sub-communicator passes the communicator suite (every collective, sizes 0 .. 2^20+3).
TEST(SubCommunicator, PassesCommSuite) {
  loopback::run(6, [](Communicator& c) {
    // Two interleaved groups: even and odd ranks, plus a permuted order for the evens.
    std::vector<int> members;
    if (c.rank() % 2 == 0)
      members = {4, 0, 2};
    else
      members = {1, 3, 5};
    auto sub = make_subcommunicator(c, members, 100);
    EXPECT_EQ(sub->size(), 3);
    EXPECT_EQ(members[sub->rank()], c.rank());
    test::run_comm_suite(*sub);
  });
}

TEST(SubCommunicator, RejectsBadMembers) {
  loopback::run(3, [](Communicator& c) {
    EXPECT_THROW(make_subcommunicator(c, {0, 0, 1}, 1), Error);
    EXPECT_THROW(make_subcommunicator(c, {0, 7}, 1), Error);
    EXPECT_THROW(make_subcommunicator(c, {0, 1, 2}, 20000), Error);
    std::vector<int> others;
    for (int p = 0; p < 3; ++p)
      if (p != c.rank()) others.push_back(p);
    EXPECT_THROW(make_subcommunicator(c, others, 1), Error);
  });
}

TEST(Hierarchical, NodeSizeMustDivideWorld) {
  loopback::run(6, [](Communicator& c) {
    try {
      make_hierarchical(c, TensorSpec{100, 1, DType::F32}, {}, HierarchicalOptions{4, "balanced"});
      FAIL() << "node size 4 accepted for 6 ranks";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("node size 4"), std::string::npos) << e.what();
    }
  });
}
