// Writes a trace with a huge dense length held sparsely (tests: tools must stay O(nnz)):
//   make_huge_trace DIR [N] [RANKS] [ITERATIONS] [ENTRIES]
// Rows are drawn uniformly (with index 0 and N-1 on every rank and a shared set for overlap, some
// repeated); values are small integers.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "zen/trace/trace.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [N] [RANKS] [ITERATIONS] [ENTRIES]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t N = argc > 2 ? std::atoll(argv[2]) : (int64_t{1} << 33) + 7;
  const int ranks = argc > 3 ? std::atoi(argv[3]) : 2;
  const int iters = argc > 4 ? std::atoi(argv[4]) : 2;
  const size_t entries = argc > 5 ? static_cast<size_t>(std::atoll(argv[5])) : 1000;
  zen::trace::TraceMeta m;
  m.N = N;
  m.ranks = ranks;
  m.iterations = iters;
  m.dtype = zen::DType::F32;
  m.row_width = 1;
  m.source = "make_huge_trace N=" + std::to_string(N);
  zen::trace::write_meta(dir, m);
  std::mt19937_64 g(7);
  std::vector<int64_t> shared(64);
  for (auto& x : shared) x = static_cast<int64_t>(g() % static_cast<uint64_t>(N));
  for (int t = 0; t < iters; ++t)
    for (int r = 0; r < ranks; ++r) {
      std::vector<int64_t> idx{0, N - 1};
      for (size_t i = 0; i < entries; ++i)
        idx.push_back(i % 3 == 0 ? shared[i % shared.size()] : static_cast<int64_t>(g() % static_cast<uint64_t>(N)));
      std::vector<float> val(idx.size());
      for (auto& v : val) v = static_cast<float>(static_cast<int>(g() % 9) - 4);
      zen::trace::write_rank_iter(dir, m, r, t, idx.data(), idx.size(), val.data());
    }
  return 0;
}
