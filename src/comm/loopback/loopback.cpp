// Loopback backend: the ranks are threads of one process (include/zen/comm/loopback.hpp). Creation
// of the ranks' communicators over one shared world, and running a function on one thread per rank
// (src/comm/in_process.hpp). The backend itself: loopback_comm.hpp and channels.cpp,
// collectives.cpp, waits.cpp.
#include "zen/comm/loopback.hpp"

#include <string>

#include "../in_process.hpp"
#include "loopback_comm.hpp"

namespace zen::loopback {

using impl::LoopbackComm;
using impl::World;

std::vector<std::unique_ptr<Communicator>> create(int n) {
  ZEN_ENFORCE(n >= 1, "loopback::create: rank count " + std::to_string(n) + " must be >= 1");
  auto w = std::make_shared<World>(n);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<LoopbackComm>(w, r));
  return out;
}

std::vector<std::exception_ptr> run_collect(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout) {
  auto comms = create(n);
  for (auto& c : comms) c->set_timeout(timeout);
  return in_process::run_rank_threads(
      n, [&](int r) { fn(*comms[r]); }, [&](int r, const char* what) { comms[r]->abort(what); });
}

void run(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout) {
  in_process::rethrow_first(run_collect(n, fn, timeout));
}

}  // namespace zen::loopback
