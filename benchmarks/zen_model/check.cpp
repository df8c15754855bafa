// zen_model: --check, the model's bytes against zen_perf's measured bytes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"
#include "zen/error.hpp"
#include "zen/trace/stats.hpp"

namespace fs = std::filesystem;

namespace zen_model {

int run_check(const std::vector<Trace>& traces, const std::string& perf_json) {
  std::ifstream f(perf_json);
  ZEN_ENFORCE(f.good(), "--check: cannot read '" + perf_json + "'");
  const json j = json::parse(f);
  const RunSettings rs = settings_of(j);
  const std::string pull = j.at("config").value("pull", "auto");
  std::printf("# zen_model --check %s: n=%d output=%s pull=%s seed=%llu warm-up %d, %d timed calls\n", perf_json.c_str(), rs.n,
              rs.sparse_out ? "sparse" : "dense", pull.c_str(), static_cast<unsigned long long>(rs.opt.seed), rs.warmup, rs.iters);
  std::printf("%-28s %14s %14s %14s %14s %14s %6s\n", "trace", "scheme", "model_sent_B", "perf_sent_B", "model_recv_B",
              "perf_recv_B", "match");
  int bad = 0, compared = 0;
  for (const auto& row : j.at("rows")) {
    const std::string scheme = row.at("scheme").get<std::string>();
    if (!model::covers(scheme)) continue;  // raw MPI baselines, auto (its statistics traffic)
    const std::string label = row.value("trace", std::string());
    const Trace* tr = trace_of(traces, label);
    if (!tr) continue;
    ZEN_ENFORCE(tr->meta.ranks >= rs.n, "--check: the trace has fewer ranks than the run");
    const auto [ms, mr] = zen_perf_bytes(*tr, rs, scheme);
    const uint64_t ps = row.at("sent_B").get<uint64_t>(), pr = row.at("recv_B").get<uint64_t>();
    const bool ok = ms == ps && mr == pr;
    bad += ok ? 0 : 1;
    ++compared;
    std::printf("%-28s %14s %14llu %14llu %14llu %14llu %6s\n", fs::path(tr->dir).filename().c_str(), scheme.c_str(),
                static_cast<unsigned long long>(ms), static_cast<unsigned long long>(ps), static_cast<unsigned long long>(mr),
                static_cast<unsigned long long>(pr), ok ? "yes" : "NO");
  }
  ZEN_ENFORCE(compared > 0, "--check: no row of '" + perf_json + "' matches the given trace(s)");
  std::printf("# %d of %d rows match exactly\n", compared - bad, compared);
  return bad ? 1 : 0;
}

}  // namespace zen_model
