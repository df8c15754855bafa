// libFuzzer target: the trace reader (zen/trace/trace.hpp). Input: 2-byte JSON length L, 2-byte index
// file length M, then trace.json (L bytes), r0_t0.idx (M bytes) and r0_t0.val (the rest), written to a
// scratch directory. read_meta / read_rank_iter must either throw zen::Error or return a record that
// satisfies the documented invariants (count * D * dtype_size value bytes, indices in [0, N/D)).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "zen/error.hpp"
#include "zen/trace/trace.hpp"

#define CHECK(c) \
  do {           \
    if (!(c)) std::abort(); \
  } while (0)

namespace {
// Scratch directory, removed at exit (a leaked string: it must outlive the atexit handler).
const std::string& dir() {
  static const std::string* d = [] {
    std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    auto* p = new std::string(base + "/zen_fuzz_trace_" + std::to_string(::getpid()));
    std::filesystem::create_directories(*p);
    std::atexit([] { std::error_code ec; std::filesystem::remove_all(dir(), ec); });
    return p;
  }();
  return *d;
}
void put(const std::string& name, const uint8_t* p, size_t n) {
  FILE* f = std::fopen((dir() + "/" + name).c_str(), "wb");
  if (!f) std::abort();
  if (n) std::fwrite(p, 1, n, f);
  std::fclose(f);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  size_t L = data[0] | (size_t{data[1]} << 8), M = data[2] | (size_t{data[3]} << 8);
  data += 4;
  size -= 4;
  if (L > size) L = size;
  if (M > size - L) M = size - L;
  put("trace.json", data, L);
  put("r0_t0.idx", data + L, M);
  put("r0_t0.val", data + L + M, size - L - M);
  try {
    const zen::trace::TraceMeta m = zen::trace::read_meta(dir());
    CHECK(m.N > 0 && m.ranks > 0 && m.iterations > 0 && m.row_width > 0 && m.N % m.row_width == 0);
    const zen::trace::RankIter ri = zen::trace::read_rank_iter(dir(), m, 0, 0);
    CHECK(ri.values.size() == ri.idx.size() * static_cast<size_t>(m.row_width) * zen::dtype_size(m.dtype));
    for (int64_t i : ri.idx) CHECK(i >= 0 && i < m.items());
  } catch (const zen::Error&) {
  }
  return 0;
}
