// zen_model's shared parts (one file per subcommand beside this: the options and the bytes table in
// main.cpp, --n in scaling.cpp, --check in check.cpp, --calibrate and --predict in calibrate.cpp): a
// trace on disk, a zen_perf --json run's settings, the model's problem and bytes for one row, lists.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "zen/model/cost_model.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/trace/trace.hpp"

namespace zen_model {

using namespace zen;
using json = nlohmann::json;

struct Trace {
  std::string dir;
  trace::TraceMeta meta;
  std::vector<std::vector<std::vector<int64_t>>> sets;
};

struct RunSettings {
  int n = 0;
  SchemeOptions opt;
  bool sparse_out = true;
  int warmup = 0, iters = 1;  ///< zen_perf's rounds: call k uses iteration k mod T; k >= warmup are counted
};

std::vector<std::string> split(const std::string& s);  ///< a comma list, empty items dropped
std::vector<int> parse_ints(const std::string& s);
std::vector<double> parse_doubles(const std::string& s);
/// The trace's index sets, sets[t][r] sorted and distinct.
Trace load(const std::string& dir);
/// A zen_perf --json run's settings (ranks, seed, encodings, output, warm-up and timed calls).
RunSettings settings_of(const json& run);
/// The trace a zen_perf row names (its directory, or one with the same last component); null if none.
const Trace* trace_of(const std::vector<Trace>& traces, const std::string& label);
model::Problem problem_of(const Trace& tr, const RunSettings& rs);
/// Most bytes any rank sends / receives per call, as zen_perf reports them (per-rank mean over the
/// counted calls, rounded down, then the maximum over ranks).
std::pair<uint64_t, uint64_t> zen_perf_bytes(const Trace& tr, const RunSettings& rs, const std::string& scheme);

// The subcommands; each returns the process's exit status.
int run_scaling(const Trace& tr, const std::vector<int>& ns, const std::vector<double>& gbps, double alpha_us, double message_us,
                const SchemeOptions& opt, bool sparse_out, const std::string& csv, const std::string& png);
int run_check(const std::vector<Trace>& traces, const std::string& perf_json);
int run_calibrate(const std::string& perf_json, const std::string& compute_from, const std::string& save);
int run_predict(const std::vector<Trace>& traces, const std::string& perf_json, const std::string& cal_json,
                double within);

}  // namespace zen_model
