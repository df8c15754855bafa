// The communicator suite under mpirun: one process per rank, one MPI start per rank count.
#include <gtest/gtest.h>

#include "comm_suite.hpp"
#include "mpi_main.hpp"

using namespace zen;

TEST(Mpi, AllCollectivesExact) { test::run_comm_suite(test::world()); }

TEST(Mpi, WrapsCallerCommunicatorWithoutReinit) {
  int inited = 0;
  MPI_Initialized(&inited);
  EXPECT_EQ(inited, 1);
  // A second zen communicator on a split of the caller's communicator works side by side.
  MPI_Comm half;
  int r = test::world().rank();
  MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
  auto c = mpi::create(half);
  std::vector<double> v(5, 1.0);
  c->allreduce(v.data(), v.size(), DType::F64);
  int hs = 0;
  MPI_Comm_size(half, &hs);
  EXPECT_EQ(v[0], static_cast<double>(hs));
  c.reset();
  MPI_Comm_free(&half);
}
