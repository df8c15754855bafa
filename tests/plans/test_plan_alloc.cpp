// Plans allocate nothing and create no thread in steady state (loopback backend, n = 1..4 ranks as
// threads; the large inputs at n = 3, the MPI test runs them at n = 2): calls 2..10 of balanced, allgather, sparse_ps, dense, dense_native and hierarchical_sparse (small inputs), sparse and dense
// output, with and without duplicate indices, one and two pool threads (large inputs: every worker
// busy). The replaced operator new and the interposed pthread_create count for the whole process
// while the counted calls run.
#include <gtest/gtest.h>

#include <thread>

#include "plan_cases.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;

class PlanAlloc : public ::testing::TestWithParam<test::AllocCase> {};

TEST_P(PlanAlloc, StepsTwoToTenAllocateNothing) {
  const test::AllocCase c = GetParam();
  // Large inputs at n = 3 only (non-power-of-two owners; the MPI test runs them at n = 2): the
  // property does not change with n, their time does (CI time).
  for (int n = c.large ? 3 : 1; n <= (c.large ? 3 : 4); ++n) {
    test::SpinBarrier bar;
    bar.n = n;
    std::vector<test::SteadyState> got(static_cast<size_t>(n));
    loopback::run(n, [&](Communicator& comm) {
      got[static_cast<size_t>(comm.rank())] = test::count_steady_state(comm, c, comm.rank() == 0, [&] { bar.wait(); });
    });
    // One process: every rank read the same process-wide counts.
    EXPECT_EQ(got[0].allocs, 0u) << test::alloc_case_name(c) << " n=" << n << ": allocations in calls 2..10";
    EXPECT_EQ(got[0].threads, 0u) << test::alloc_case_name(c) << " n=" << n << ": threads created in calls 2..10";
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

// The thread counter itself works: a std::thread (created through libstdc++) is seen.
TEST(PlanAllocCounter, SeesAThreadCreation) {
  const uint64_t before = test::threads_created();
  std::thread([] {}).join();
  EXPECT_EQ(test::threads_created() - before, 1u);
}

INSTANTIATE_TEST_SUITE_P(Schemes, PlanAlloc, ::testing::ValuesIn(test::alloc_cases()),
                         [](const ::testing::TestParamInfo<test::AllocCase>& i) { return test::alloc_case_name(i.param); });
