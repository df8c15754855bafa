// The FL learner over MPI: one process per rank (satellites multiplexed over ranks 1..n-1, the
// server on rank 0). The model reached must be bitwise the one of the in-process loopback run.
#include <gtest/gtest.h>

#include "../../core/mpi_main.hpp"
#include "sim_test_util.hpp"
#include "zen/fl/sim/loopback_runner.hpp"

namespace zen::fl::sim {
namespace {

using test::tiny_federation;
using test::tiny_test;
using test::tiny_train;

class LearnerMpi : public ::testing::TestWithParam<const char*> {};

TEST_P(LearnerMpi, SameModelAsLoopback) {
  Communicator& comm = zen::test::world();
  const TimingContext ctx(test::reference(), test::reference_plan(), TimingConfig{});
  const Schedule s = simulate(GetParam(), ctx, 2);
  const LearnResult mpi = execute(s, tiny_federation(), tiny_test(), comm);
  if (comm.rank() != 0) {
    EXPECT_TRUE(mpi.rows.empty());
    return;
  }
  const LearnResult loop = run_loopback(s, tiny_federation(), tiny_test(), comm.size());
  ASSERT_FALSE(mpi.final_params.empty());
  EXPECT_EQ(mpi.final_params, loop.final_params);
  ASSERT_EQ(mpi.rows.size(), loop.rows.size());
  for (size_t i = 0; i < mpi.rows.size(); ++i) {
    EXPECT_EQ(mpi.rows[i].accuracy, loop.rows[i].accuracy);
    EXPECT_EQ(mpi.rows[i].time_s, loop.rows[i].time_s);
    EXPECT_EQ(mpi.rows[i].ps_transfers, loop.rows[i].ps_transfers);
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, LearnerMpi, ::testing::Values("baseline", "ring", "ring-async"));

}  // namespace
}  // namespace zen::fl::sim
