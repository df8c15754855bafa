#pragma once
// zen_perf's benchmark body on one rank: a trace replay (--trace) or the synthetic size sweep, timed,
// checked and dumped, as the report's rows.
#include <vector>

#include "options.hpp"
#include "report.hpp"

namespace zen_perf {

/// The benchmark body on one rank. Returns the rows (meaningful on rank 0).
std::vector<Row> run_bench(Communicator& comm, const Config& cfg);

}  // namespace zen_perf
