#pragma once
// Minimal fork-join over std::thread for the CPU data path (hashing, decoding).
#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

namespace zen::detail {

/// Cores this process may use by default: the hardware threads divided by the ranks of this job on
/// the node (Open MPI / MPICH export the local rank count), so ranks sharing a node do not oversubscribe.
inline int default_threads() {
  int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"}) {
    if (const char* v = std::getenv(var)) {
      int local = std::atoi(v);
      if (local > 0) return std::max(1, hw / local);
    }
  }
  return hw;
}

inline int resolve_threads(int requested, size_t work, size_t min_per_thread = 1u << 15) {
  int t = requested > 0 ? requested : default_threads();
  size_t by_work = std::max<size_t>(1, work / min_per_thread);
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(t), by_work));
}

/// f(begin, end, thread_id) over [0, n) split into `threads` contiguous chunks.
template <typename F>
void parallel_for(size_t n, int threads, F&& f) {
  if (threads <= 1 || n == 0) {
    f(size_t{0}, n, 0);
    return;
  }
  std::vector<std::thread> th;
  const size_t chunk = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  for (int t = 1; t < threads; ++t) {
    size_t b = std::min(n, chunk * static_cast<size_t>(t)), e = std::min(n, b + chunk);
    th.emplace_back([&f, b, e, t] { f(b, e, t); });
  }
  f(0, std::min(n, chunk), 0);
  for (auto& x : th) x.join();
}

}  // namespace zen::detail
