// Timeout safety under mpirun (see timeout_safety.hpp). The peers of the late rank time out inside a
// plan's call, free the plan and their buffers and go on calling MPI (their own collectives on
// MPI_COMM_WORLD, which progress anything MPI still has in flight); then the late rank makes the
// call. MPI may complete the abandoned collectives then: it must only touch memory the communicator
// kept (quarantine), never the freed buffers (ASan in the sanitizer suite). Caller memory is never
// handed to a collective that has not been entered by every rank, so a caller's freed dense output
// is never written either. Needs >= 2 ranks (skipped at 1).
#include <gtest/gtest.h>

#include <thread>

#include "../core/mpi_main.hpp"
#include "timeout_safety.hpp"

using namespace zen;

class MpiLateRank : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(MpiLateRank, AbandonedCollectivesNeverTouchFreedMemory) {
  const auto& [scheme, dense_out] = GetParam();
  const int n = test::world().size(), me = test::world().rank();
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  const int late = n - 1;
  const int T = 300;
  auto c = mpi::create(MPI_COMM_WORLD);
  c->set_timeout(std::chrono::milliseconds(T));
  auto res = reltest::late_rank_round(*c, scheme, dense_out, late, [&] {
    // The others time out at T and finish their presence check by 1.5 T.
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * T + 200));
  });
  // Everybody keeps using MPI: anything MPI still holds progresses now.
  for (int k = 0; k < 20; ++k) {
    std::vector<double> x(4096, 1.0);
    MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(x.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    ASSERT_EQ(x[17], static_cast<double>(n));
  }
  EXPECT_TRUE(res.threw) << scheme << " rank " << me << " finished a call its peers had abandoned";
  if (me != late) {
    EXPECT_EQ(res.code, Result::Timeout) << res.what;
    EXPECT_NE(res.what.find("peer " + std::to_string(late)), std::string::npos) << res.what;
    // The plan's workspace was kept alive for MPI (the caller's dense output of dense_native never
    // reached MPI: the presence handshake failed first).
    if (!(scheme == "dense_native" && dense_out)) {
      EXPECT_GE(c->quarantined(), 1u) << scheme;
    }
  } else {
    EXPECT_TRUE(res.code == Result::Timeout || res.code == Result::RemoteError) << res.what;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

INSTANTIATE_TEST_SUITE_P(Schemes, MpiLateRank,
                         ::testing::Combine(::testing::ValuesIn(reltest::safety_schemes()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, bool>>& i) {
                           return std::get<0>(i.param) + (std::get<1>(i.param) ? "_dense" : "_sparse");
                         });
