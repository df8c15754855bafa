// Timeout safety on the loopback backend (see timeout_safety.hpp): a rank that arrives after its
// peers timed out and freed their buffers reads nothing of theirs (posts are withdrawn on failure),
// and gets a timeout itself. Run under ASan by scripts/sanitize.sh.
#include <gtest/gtest.h>

#include "timeout_safety.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;

class LateRank : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(LateRank, PeersThatTimedOutLeaveNothingBehind) {
  const auto& [scheme, dense_out] = GetParam();
  const int n = 3, late = 2;
  const auto T = std::chrono::milliseconds(150);
  std::vector<reltest::LateResult> res(n);
  auto errs = loopback::run_collect(
      n,
      [&](Communicator& c) {
        res[static_cast<size_t>(c.rank())] = reltest::late_rank_round(c, scheme, dense_out, late, [&] {
          std::this_thread::sleep_for(3 * T);  // the others have timed out and freed everything by now
        });
      },
      T);
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(errs[r]);
    EXPECT_TRUE(res[r].threw) << scheme << " rank " << r << " finished a call its peers had abandoned";
    EXPECT_EQ(res[r].code, Result::Timeout) << res[r].what;
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, LateRank,
                         ::testing::Combine(::testing::ValuesIn(reltest::safety_schemes()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, bool>>& i) {
                           return std::get<0>(i.param) + (std::get<1>(i.param) ? "_dense" : "_sparse");
                         });
