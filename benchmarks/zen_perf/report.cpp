// zen_perf's report (report.hpp): rows aggregated over the ranks, the printed table, the speed-up
// summary and the JSON file.
#include "report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>

#include "zen/error.hpp"

namespace zen_perf {

using namespace zen;
using json = nlohmann::json;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Aggregates {
  uint64_t sent = 0, recv = 0, wrong = 0;
  double push = 1, pull = 1;
  double bound_eff = 0;  // sum over ranks of bytes sent / sum of their bounds (0 when no rank knows its bound)
};
Aggregates aggregate(Communicator& comm, uint64_t sent, uint64_t recv, uint64_t wrong, double push, double pull,
                     double bound) {
  struct Rec {
    uint64_t sent, recv, wrong;
    double push, pull, bound;
  };
  auto all = comm.allgather_value(Rec{sent, recv, wrong, push, pull, bound});
  Aggregates a;
  double sent_all = 0, bound_all = 0;
  for (const auto& x : all) {
    sent_all += static_cast<double>(x.sent);
    bound_all += x.bound;
  }
  if (bound_all > 0) a.bound_eff = sent_all / bound_all;
  for (const auto& x : all) {
    a.sent = std::max(a.sent, x.sent);
    a.recv = std::max(a.recv, x.recv);
    a.wrong += x.wrong;
    a.push = std::max(a.push, x.push);
    a.pull = std::max(a.pull, x.pull);
  }
  return a;
}

// Every rank's phases side by side (a collective: every rank calls it once per row). Empty when the
// ranks' phase lists differ in length or names.
std::vector<PhaseAcross> phases_over_ranks(Communicator& comm, const std::vector<PhaseReport>& mine) {
  const auto counts = comm.allgather_value(static_cast<uint64_t>(mine.size()));
  for (uint64_t c : counts)
    if (c != counts[0]) return {};
  struct Rec {
    double wall, cpu;
    uint64_t bytes;
    uint64_t name_hash;
  };
  std::vector<PhaseAcross> out(static_cast<size_t>(counts[0]));
  bool same = true;
  for (size_t i = 0; i < out.size(); ++i) {
    const PhaseReport& p = mine[i];
    const auto all = comm.allgather_value(Rec{p.seconds, p.cpu_seconds, std::max(p.sent, p.recv), std::hash<std::string>{}(p.name)});
    out[i].name = p.name;
    for (const auto& x : all) {
      same = same && x.name_hash == all[0].name_hash;
      out[i].wall_max = std::max(out[i].wall_max, x.wall);
      out[i].cpu_max = std::max(out[i].cpu_max, x.cpu);
      out[i].cpu_sum += x.cpu;
      out[i].bytes_max = std::max(out[i].bytes_max, x.bytes);
    }
  }
  if (!same) out.clear();
  return out;
}

void fill_bw(Row& row, int n) {
  const double t = row.time_us * 1e-6;
  row.algbw = t > 0 ? static_cast<double>(row.size) / t / 1e9 : 0;
  row.busbw = row.algbw * (n > 1 ? 2.0 * (n - 1) / n : 0.0);
}

json summarize(const std::vector<Row>& rows, bool print) {
  // Per scheme: geometric mean over sizes of t_ref / t_scheme (> 1: faster than the reference), for
  // every reference present in the run (zen's dense and allgather, the raw MPI baselines).
  std::map<std::pair<std::string, uint64_t>, std::map<std::string, double>> t;  // (trace, size) -> scheme -> time
  std::vector<std::string> order;
  for (const auto& r : rows) {
    t[{r.label, r.size}][r.scheme] = r.time_us;
    if (std::find(order.begin(), order.end(), r.scheme) == order.end()) order.push_back(r.scheme);
  }
  std::vector<std::string> refs;
  for (const char* ref : {"dense", "allgather", "mpi_allreduce", "mpi_allgatherv"})
    if (std::find(order.begin(), order.end(), ref) != order.end()) refs.emplace_back(ref);
  json out = json::object();
  if (print) {
    std::printf("# summary: speedup = time(reference) / time(scheme), geometric mean over sizes (and traces)\n# %13s", "scheme");
    for (const auto& ref : refs) std::printf(" %16s", ("vs " + ref).c_str());
    std::printf("\n");
  }
  for (const auto& s : order) {
    json j;
    if (print) std::printf("# %13s", s.c_str());
    for (const auto& ref : refs) {
      double l = 0;
      int k = 0;
      for (const auto& [size, m] : t) {
        if (!m.count(s) || !m.count(ref) || m.at(s) <= 0) continue;
        l += std::log(m.at(ref) / m.at(s));
        ++k;
      }
      if (k) j["vs_" + ref] = std::exp(l / k);
      if (print) {
        char buf[32] = "-";
        if (k) std::snprintf(buf, sizeof buf, "%.3fx", std::exp(l / k));
        std::printf(" %16s", buf);
      }
    }
    if (print) std::printf("\n");
    out[s] = j;
  }
  return out;
}

}  // namespace

void print_header(const Config& cfg, int n, const char* backend, double gamma, bool trace, int iters, uint32_t D) {
  std::printf("# zen_perf: %d ranks (%s), dtype %s, row width %u, %s, iters %d, warm-up %d, check %d, output %s, pull %s, push %s\n", n,
              backend, cfg.dtype.c_str(), D,
              trace ? ("trace " + cfg.trace_dir).c_str()
                    : ("density " + std::to_string(cfg.density) + ", overlap (target gamma) " + std::to_string(gamma) +
                       ", skew " + std::to_string(cfg.skew) + ", seed " + std::to_string(cfg.seed))
                          .c_str(),
              iters, cfg.warmup, cfg.check, cfg.output.c_str(), cfg.pull.c_str(), cfg.push.c_str());
  std::printf("# size: dense bytes; time_us: median over iterations of the max over ranks (min_us/max_us: fastest and\n"
              "# slowest iteration); each iteration calls every scheme once, in an order of its own; algbw = size / time and busbw =\n"
              "# algbw * 2(n-1)/n are dense-equivalent rates (comparable with all_reduce_perf); sent_B/recv_B: most bytes\n"
              "# any rank sent/received per call; mean_us: mean over iterations of the max over ranks (a 20-call cost with\n"
              "# -n 20 -w 0 --auto-settle 0, auto's decision calls included); imbalance: max/mean load over owners (push or pull, the larger);\n"
              "# #wrong: elements differing from a dense reference of all ranks' inputs. mpi_allreduce and\n"
              "# mpi_allgatherv are raw MPI calls written as a user would (mpi_allreduce always yields the dense sum).\n");
  std::printf("# bound_eff: bytes all ranks sent per call / (value bytes + log2 C(m, K) / 8 of every index set sent),\n"
              "# the distance to the information bound (balanced, sparse_ps and auto running them; '-' otherwise).\n");
  // mean_us is the last column: scripts read the others by position (scheme $4, time_us $6, ...).
  std::printf("%12s %11s %5s %19s %8s %11s %10s %10s %8s %8s %12s %12s %9s %9s %7s %11s\n", "size", "count", "type", "scheme",
              "density", "time_us", "min_us", "max_us", "algbw", "busbw", "sent_B", "recv_B", "imbalance", "bound_eff", "#wrong",
              "mean_us");
  std::fflush(stdout);
}

void print_row(const Row& r, const char* type, bool explain) {
  char eff[32] = "-";
  if (r.bound_eff > 0) std::snprintf(eff, sizeof eff, "%.3f", r.bound_eff);
  std::printf("%12llu %11llu %5s %19s %8.4f %11.1f %10.1f %10.1f %8.3f %8.3f %12llu %12llu %9.3f %9s %7llu %11.1f\n",
              static_cast<unsigned long long>(r.size), static_cast<unsigned long long>(r.count), type, r.scheme.c_str(),
              r.density, r.time_us, r.time_min_us, r.time_max_us, r.algbw, r.busbw, static_cast<unsigned long long>(r.sent),
              static_cast<unsigned long long>(r.recv), std::max(r.push_imb, r.pull_imb), eff,
              static_cast<unsigned long long>(r.wrong), r.mean_us);
  if (!r.ran.empty()) {
    std::printf("#   auto ran:");
    for (const auto& [name, calls] : r.ran) std::printf(" %s x%llu", name.c_str(), static_cast<unsigned long long>(calls));
    std::printf("\n");
  }
  if (r.decision_calls > 0)
    std::printf("#   %s decided in %llu calls (%llu of them timed), %.1f ms in all (slowest rank)\n", r.scheme.c_str(),
                static_cast<unsigned long long>(r.decision_calls), static_cast<unsigned long long>(r.decision_timed),
                r.decision_s * 1e3);
  if ((r.scheme.rfind("hier_", 0) == 0 || r.scheme == "hierarchical_sparse") && !r.phases.empty()) {
    // The hierarchical modes' traffic by where it goes: inside a node (reduce-scatter / node push,
    // allgather / node pull) and across nodes (phase "inter"), rank 0, last call.
    uint64_t in_s = 0, in_r = 0, x_s = 0, x_r = 0;
    for (const auto& p : r.phases) {
      const bool inter = p.name == "inter";
      (inter ? x_s : in_s) += p.sent;
      (inter ? x_r : in_r) += p.recv;
    }
    std::printf("#   %s bytes on rank 0 per call: inside the node sent %llu recv %llu, across nodes sent %llu recv %llu\n",
                r.scheme.c_str(), static_cast<unsigned long long>(in_s), static_cast<unsigned long long>(in_r),
                static_cast<unsigned long long>(x_s), static_cast<unsigned long long>(x_r));
  }
  // Per-phase CPU time (--phase-cpu): one line per phase, the slowest rank's wall time beside the CPU
  // time of the busiest rank and of all ranks together (the cores they share must supply the latter).
  double cpu_all = 0;
  for (const auto& p : r.phases_ranks) cpu_all += p.cpu_sum;
  if (cpu_all > 0) {
    std::printf("#   %s per phase (mean per call; wall: slowest rank; cpu: busiest rank / all ranks; bytes: busiest rank's max(sent, recv))\n",
                r.scheme.c_str());
    double wall = 0, cpu_max = 0;
    for (const auto& p : r.phases_ranks) {
      std::printf("#     %-10s wall %9.3f ms  cpu %9.3f ms / %9.3f ms  bytes %llu\n", p.name.c_str(), p.wall_max * 1e3, p.cpu_max * 1e3,
                  p.cpu_sum * 1e3, static_cast<unsigned long long>(p.bytes_max));
      wall += p.wall_max;
      cpu_max += p.cpu_max;
    }
    std::printf("#     %-10s wall %9.3f ms  cpu %9.3f ms / %9.3f ms\n", "(sum)", wall * 1e3, cpu_max * 1e3, cpu_all * 1e3);
  }
  if (explain)
    for (const auto& d : r.decisions) std::printf("#   %s\n", d.c_str());
  std::fflush(stdout);
}

Row finish_runner(Communicator& comm, Runner& rn, uint64_t N, DType dt, double dens, double gam) {
  const uint64_t calls = std::max<uint64_t>(1, rn.calls);
  auto agg = aggregate(comm, rn.sent_sum / calls, rn.recv_sum / calls, rn.wrong, rn.push, rn.pull,
                       rn.bound_sum / static_cast<double>(calls));
  Row row;
  row.size = N * dtype_size(dt);
  row.count = N;
  row.scheme = rn.name;
  row.density = dens;
  row.gamma = gam;
  row.time_us = median(rn.times) * 1e6;
  row.mean_us = 0;
  for (double x : rn.times) row.mean_us += x;
  if (!rn.times.empty()) row.mean_us = row.mean_us / static_cast<double>(rn.times.size()) * 1e6;
  row.time_min_us = rn.times.empty() ? 0 : *std::min_element(rn.times.begin(), rn.times.end()) * 1e6;
  row.time_max_us = rn.times.empty() ? 0 : *std::max_element(rn.times.begin(), rn.times.end()) * 1e6;
  row.sent = agg.sent;
  row.recv = agg.recv;
  row.push_imb = agg.push;
  row.pull_imb = agg.pull;
  row.wrong = agg.wrong;
  row.bound_eff = agg.bound_eff;
  row.encoding = rn.encoding;
  row.phases = rn.phases;
  row.phases_ranks = phases_over_ranks(comm, rn.phases);
  row.decisions = rn.decisions;
  row.ran = rn.ran;
  row.decision_calls = rn.decision_calls;
  row.decision_timed = rn.decision_timed;
  row.decision_s = rn.decision_s;
  fill_bw(row, comm.size());
  return row;
}

void finish(Communicator& comm, const Config& cfg, const std::vector<Row>& rows) {
  if (comm.rank() != 0) return;
  uint64_t wrong = 0;
  for (const auto& r : rows) wrong += r.wrong;
  json summary = summarize(rows, true);
  std::printf("# total #wrong: %llu\n", static_cast<unsigned long long>(wrong));
  if (cfg.json_file.empty()) return;
  json j;
  j["ranks"] = comm.size();
  j["backend"] = comm.backend_name();
  j["config"] = {{"b", cfg.b},         {"e", cfg.e},       {"f", cfg.f},         {"density", cfg.density},
                 {"overlap", cfg.overlap}, {"skew", cfg.skew}, {"dtype", cfg.dtype}, {"row_width", cfg.row_width},
                 {"iters", cfg.iters}, {"warmup", cfg.warmup}, {"check", cfg.check}, {"pull", cfg.pull}, {"push", cfg.push},
                 {"output", cfg.output}, {"seed", cfg.seed}, {"trace", cfg.trace_dir}, {"block_size", cfg.block_size},
                 {"sparcml_switch", cfg.sparcml_switch}, {"auto_settle", cfg.auto_settle}, {"prelude", cfg.prelude}};
  j["rows"] = json::array();
  for (const auto& r : rows) {
    json x = {{"trace", r.label},     {"size", r.size},       {"count", r.count},         {"scheme", r.scheme},       {"density", r.density},
              {"gamma", r.gamma},     {"time_us", r.time_us},     {"mean_us", r.mean_us},     {"time_min_us", r.time_min_us},
              {"time_max_us", r.time_max_us}, {"algbw_GBps", r.algbw}, {"busbw_GBps", r.busbw}, {"sent_B", r.sent},
              {"recv_B", r.recv},     {"push_imbalance", r.push_imb}, {"pull_imbalance", r.pull_imb},
              {"encoding", r.encoding}, {"wrong", r.wrong}};
    if (r.bound_eff > 0) x["bound_eff"] = r.bound_eff;
    x["phases_rank0"] = json::array();
    for (const auto& p : r.phases)
      x["phases_rank0"].push_back({{"name", p.name}, {"sent", p.sent}, {"recv", p.recv}, {"seconds", p.seconds}, {"cpu_seconds", p.cpu_seconds}});
    if (!r.phases_ranks.empty()) {
      x["phases_ranks"] = json::array();
      for (const auto& p : r.phases_ranks)
        x["phases_ranks"].push_back({{"name", p.name}, {"wall_max_s", p.wall_max}, {"cpu_max_s", p.cpu_max}, {"cpu_sum_s", p.cpu_sum},
                                     {"bytes_max", p.bytes_max}});
    }
    if (!r.decisions.empty()) x["decisions"] = r.decisions;
    if (!r.ran.empty()) {
      x["ran"] = json::object();
      for (const auto& [name, calls] : r.ran) x["ran"][name] = calls;
    }
    if (r.decision_calls > 0)
      x["decision"] = {{"calls", r.decision_calls}, {"timed", r.decision_timed}, {"ms", r.decision_s * 1e3}};
    j["rows"].push_back(x);
  }
  j["summary"] = summary;
  j["total_wrong"] = wrong;
  std::ofstream f(cfg.json_file);
  ZEN_ENFORCE(f.good(), "--json: cannot open '" + cfg.json_file + "' for writing");
  f << j.dump(2) << "\n";
}

}  // namespace zen_perf
