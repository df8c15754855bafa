// Plans allocate nothing in steady state (loopback backend, n = 1..4 ranks as threads): calls 2..10
// of balanced, allgather, sparse_ps, dense and dense_native, sparse and dense output, with and
// without duplicate indices, one and two pool threads. The replaced operator new counts every
// allocation of the process while the counted calls run.
#include <gtest/gtest.h>

#include "plan_cases.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;

class PlanAlloc : public ::testing::TestWithParam<test::AllocCase> {};

TEST_P(PlanAlloc, StepsTwoToTenAllocateNothing) {
  const test::AllocCase c = GetParam();
  for (int n = 1; n <= 4; ++n) {
    test::SpinBarrier bar;
    bar.n = n;
    std::vector<uint64_t> allocs(static_cast<size_t>(n));
    loopback::run(n, [&](Communicator& comm) {
      allocs[static_cast<size_t>(comm.rank())] = test::count_steady_state_allocs(comm, c, [&] { bar.wait(); });
    });
    EXPECT_EQ(allocs[0], 0u) << test::alloc_case_name(c) << " n=" << n << ": allocations in calls 2..10";
  }
}

// The counter itself works: a vector growth is seen.
TEST(PlanAllocCounter, SeesAnAllocation) {
  test::g_allocs.store(0);
  test::g_count_allocs.store(true);
  std::vector<int>* v = new std::vector<int>(100);
  test::g_count_allocs.store(false);
  delete v;
  EXPECT_GE(test::g_allocs.load(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Schemes, PlanAlloc, ::testing::ValuesIn(test::alloc_cases()),
                         [](const ::testing::TestParamInfo<test::AllocCase>& i) { return test::alloc_case_name(i.param); });
