#include "zen/fl/sim/loopback_runner.hpp"

#include <algorithm>

#include "zen/comm/loopback.hpp"

namespace zen::fl::sim {

LearnResult run_loopback(const Schedule& s, const Federation& fed, const Dataset& test, int ranks) {
  const int K = s.num_satellites;
  if (ranks <= 0) ranks = K <= 64 ? K + 1 : 16;
  ranks = std::min(ranks, K + 1);
  std::vector<LearnResult> per(static_cast<std::size_t>(ranks));
  loopback::run(
      ranks,
      [&](Communicator& comm) {
        comm.set_timeout(Communicator::Ms(600000));
        per[static_cast<std::size_t>(comm.rank())] = execute(s, fed, test, comm);
      },
      Communicator::Ms(600000));
  return merge_ranks(std::move(per));
}

LearnRunner loopback_runner(int ranks) {
  return [ranks](const Schedule& s, const Federation& fed, const Dataset& test) { return run_loopback(s, fed, test, ranks); };
}

}  // namespace zen::fl::sim
