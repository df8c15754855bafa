// In-process ranks: one thread per rank, errors told to the peers at once (see in_process.hpp).
#include "in_process.hpp"

#include <thread>

#include "zen/error.hpp"

namespace zen::in_process {

std::vector<std::exception_ptr> run_rank_threads(int n, const std::function<void(int)>& body,
                                                 const std::function<void(int, const char*)>& on_error,
                                                 const std::function<void(int)>& after) {
  std::vector<std::exception_ptr> errs(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errs[r] = std::current_exception();
        on_error(r, e.what());
      } catch (...) {
        errs[r] = std::current_exception();
        on_error(r, "unknown exception");
      }
      if (after) after(r);
    });
  }
  for (auto& t : th) t.join();
  return errs;
}

void rethrow_first(const std::vector<std::exception_ptr>& errs) {
  // Prefer an original error over the RemoteError echoes it caused on other ranks.
  std::exception_ptr first, remote;
  for (auto& e : errs) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (err.code() == Result::RemoteError) {
        if (!remote) remote = e;
      } else if (!first) {
        first = e;
      }
    } catch (...) {
      if (!first) first = e;
    }
  }
  if (first) std::rethrow_exception(first);
  if (remote) std::rethrow_exception(remote);
}

}  // namespace zen::in_process
