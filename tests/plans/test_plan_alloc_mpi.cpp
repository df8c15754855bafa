// The steady-state allocation check under mpirun (one process per rank, MPI backend): zen allocates
// nothing in calls 2..10 (MPI's own internal allocations do not go through operator new).
#include <gtest/gtest.h>

#include "../core/mpi_main.hpp"
#include "plan_cases.hpp"

using namespace zen;

class MpiPlanAlloc : public ::testing::TestWithParam<test::AllocCase> {};

TEST_P(MpiPlanAlloc, StepsTwoToTenAllocateNothing) {
  const test::AllocCase c = GetParam();
  Communicator& comm = test::world();
  const uint64_t got = test::count_steady_state_allocs(comm, c, [&] { MPI_Barrier(MPI_COMM_WORLD); });
  uint64_t worst = 0;
  MPI_Allreduce(&got, &worst, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(worst, 0u) << test::alloc_case_name(c) << ": allocations in calls 2..10 on some rank";
}

INSTANTIATE_TEST_SUITE_P(Schemes, MpiPlanAlloc, ::testing::ValuesIn(test::alloc_cases()),
                         [](const ::testing::TestParamInfo<test::AllocCase>& i) { return test::alloc_case_name(i.param); });
