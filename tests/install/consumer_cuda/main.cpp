// Links the installed zen::cuda; with a GPU it runs h0 on the device and checks it against the
// CPU hash, without one it says so and passes (GPU tests skip cleanly without a device).
#include <cstdio>
#include <string>
#include <vector>

#include "zen/cuda/runtime.hpp"
#include "zen/hash/hash.hpp"

int main() {
  std::string why;
  const int devices = zen::cuda::device_count(&why);
  if (devices == 0) {
    std::printf("consumer_cuda: linked zen::cuda; no GPU here (%s), device check skipped\n", why.c_str());
    return 0;
  }
  std::vector<int64_t> idx{0, 1, 2, 999, 123456};
  std::vector<uint32_t> owner(idx.size());
  std::vector<uint64_t> pos(idx.size());
  zen::cuda::partition_host(idx.data(), idx.size(), 1000000, 7, 42, owner.data(), pos.data());
  const auto h0 = zen::Partitioner::make(1000000, 7, 42);
  int wrong = 0;
  for (size_t i = 0; i < idx.size(); ++i) wrong += owner[i] != h0.owner(static_cast<uint64_t>(idx[i]));
  std::printf("consumer_cuda: %d GPU(s), device h0 vs CPU h0: %d wrong\n", devices, wrong);
  return wrong == 0 ? 0 : 1;
}
