// zen_dump_check: checks a result dump (zen_perf --dump) against a reference computed here, outside
// zen_perf: the trace reader (zen_trace_lib) reads every rank's input record of every iteration, a
// std::map sums them per row in double, and each dumped record r<r>_t<t> must hold exactly that sum:
// indices strictly ascending and equal to the union of the inputs' indices, every value equal to the
// sum rounded to the dtype (the test traces hold small integers, so every scheme's sum is exact).
//
//   zen_dump_check INPUT_TRACE DUMP_DIR [DUMP_DIR...]
// Prints one line per dump ("dump_check: DIR: T iterations x n ranks: wrong records W") and exits 1
// if any record is wrong or missing.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "zen/trace/trace.hpp"

namespace {
using namespace zen;

// Row -> per-column sums of every rank's record of iteration t (the first `ranks` ranks).
std::map<int64_t, std::vector<double>> reference(const std::string& dir, const trace::TraceMeta& meta, int ranks, int t) {
  std::map<int64_t, std::vector<double>> sum;
  const size_t D = static_cast<size_t>(meta.row_width);
  for (int r = 0; r < ranks; ++r) {
    const trace::RankIter ri = trace::read_rank_iter(dir, meta, r, t);
    const std::vector<double> v = trace::values_to_double(ri, meta);
    for (size_t i = 0; i < ri.count(); ++i) {
      auto& row = sum[ri.idx[i]];
      row.resize(D, 0.0);
      for (size_t c = 0; c < D; ++c) row[c] += v[i * D + c];
    }
  }
  return sum;
}

// Empty string when the record equals the reference, else what differs first.
std::string compare(const std::map<int64_t, std::vector<double>>& ref, const trace::RankIter& got,
                    const trace::TraceMeta& meta) {
  const size_t D = static_cast<size_t>(meta.row_width);
  if (got.count() != ref.size())
    return std::to_string(got.count()) + " rows, the reference has " + std::to_string(ref.size());
  // Both sides as raw dtype bytes: the reference sum rounded once to the dtype.
  const std::vector<double> gv = trace::values_to_double(got, meta);
  size_t i = 0;
  for (const auto& [row, sums] : ref) {
    if (got.idx[i] != row)
      return "position " + std::to_string(i) + " holds row " + std::to_string(got.idx[i]) + ", the reference row " +
             std::to_string(row);
    const std::vector<uint8_t> want = trace::values_from_double(sums, meta.dtype);
    const std::vector<uint8_t> have = trace::values_from_double(
        std::vector<double>(gv.begin() + static_cast<std::ptrdiff_t>(i * D), gv.begin() + static_cast<std::ptrdiff_t>((i + 1) * D)),
        meta.dtype);
    if (want != have)
      return "row " + std::to_string(row) + ": value " + std::to_string(gv[i * D]) + ", the reference " +
             std::to_string(sums[0]) + " (first column)";
    ++i;
  }
  return {};
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: zen_dump_check INPUT_TRACE DUMP_DIR [DUMP_DIR...]\n");
    return 2;
  }
  const std::string in = argv[1];
  int status = 0;
  try {
    const trace::TraceMeta meta = trace::read_meta(in);
    for (int a = 2; a < argc; ++a) {
      const std::string dump = argv[a];
      const trace::TraceMeta dm = trace::read_meta(dump);
      if (dm.N != meta.N || dm.row_width != meta.row_width || dm.dtype != meta.dtype || dm.iterations != meta.iterations ||
          dm.ranks > meta.ranks) {
        std::printf("dump_check: %s: header differs from the input's (N, D, dtype, iterations or ranks)\n", dump.c_str());
        status = 1;
        continue;
      }
      int wrong = 0;
      for (int t = 0; t < meta.iterations; ++t) {
        const auto ref = reference(in, meta, dm.ranks, t);
        for (int r = 0; r < dm.ranks; ++r) {
          std::string why;
          try {
            why = compare(ref, trace::read_rank_iter(dump, dm, r, t), meta);
          } catch (const std::exception& e) {
            why = e.what();
          }
          if (why.empty()) continue;
          if (wrong < 5) std::printf("dump_check: %s: rank %d iteration %d: %s\n", dump.c_str(), r, t, why.c_str());
          ++wrong;
        }
      }
      std::printf("dump_check: %s: %d iterations x %d ranks: wrong records %d\n", dump.c_str(), meta.iterations, dm.ranks,
                  wrong);
      if (wrong) status = 1;
    }
  } catch (const std::exception& e) {
    std::printf("dump_check: %s\n", e.what());
    return 1;
  }
  return status;
}
