// zen_model: the cost model (zen/model/cost_model.hpp) on a trace.
//
//   zen_model --trace DIR [--ranks 4,8]            bytes per call of every scheme (exact: the model's
//                                                  counts are the trace's own index sets)
//   zen_model --trace DIR --check PERF.json        the same with zen_perf's settings from its --json
//                                                  output, compared with its measured sent_B/recv_B
//   zen_model --trace DIR --n 2,4,...,1024 --gbps 25,100 [--csv F] [--png F]
//                                                  predicted time normalized to the dense allreduce
//                                                  for rank counts beyond the trace (gamma(k)
//                                                  extrapolated, see docs/cost-model.md)
//   zen_model --calibrate PERF.json [--compute-from RUN.json] [--save CAL.json]
//                                                  fit alpha and beta (and a per-row compute cost per
//                                                  scheme) to a zen_perf run on this machine
//   zen_model --trace DIR --predict PERF.json --calibration CAL.json
//                                                  every row of a zen_perf trace run (another rank
//                                                  count) predicted from that calibration: alpha per
//                                                  round, beta per byte (the model's exact bytes),
//                                                  the scheme's compute per row; measured beside it
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

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "zen/error.hpp"
#include "zen/model/cost_model.hpp"
#include "zen/trace/stats.hpp"
#include "zen/trace/trace.hpp"

using namespace zen;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

/// The trace's index sets, sets[t][r] sorted and distinct.
struct Trace {
  std::string dir;
  trace::TraceMeta meta;
  std::vector<std::vector<std::vector<int64_t>>> sets;
};

Trace load(const std::string& dir) {
  Trace tr;
  tr.dir = dir;
  tr.meta = trace::read_meta(dir);
  tr.sets.resize(static_cast<size_t>(tr.meta.iterations));
  for (int t = 0; t < tr.meta.iterations; ++t)
    for (int r = 0; r < tr.meta.ranks; ++r) {
      auto v = trace::read_rank_indices(dir, tr.meta, r, t);
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      tr.sets[static_cast<size_t>(t)].push_back(std::move(v));
    }
  return tr;
}

struct RunSettings {
  int n = 0;
  SchemeOptions opt;
  bool sparse_out = true;
  int warmup = 0, iters = 1;  ///< zen_perf's rounds: call k uses iteration k mod T; k >= warmup are counted
};

/// A zen_perf --json run's settings (ranks, seed, encodings, output, warm-up and timed calls).
RunSettings settings_of(const json& run) {
  const json& cf = run.at("config");
  RunSettings rs;
  rs.n = run.at("ranks").get<int>();
  rs.opt.seed = cf.at("seed").get<uint64_t>();
  rs.opt.pull = parse_index_encoding(cf.value("pull", std::string("auto")));
  rs.opt.push = parse_index_encoding(cf.value("push", std::string("auto")));
  rs.opt.block_size = cf.value("block_size", 256u);
  rs.opt.sparcml_dense_switch = cf.value("sparcml_switch", 0.0);
  rs.sparse_out = cf.value("output", std::string("dense")) == "sparse";
  rs.warmup = cf.at("warmup").get<int>();
  rs.iters = cf.at("iters").get<int>();
  return rs;
}

/// The trace a zen_perf row names (its directory, or one with the same last component); null if none.
const Trace* trace_of(const std::vector<Trace>& traces, const std::string& label) {
  const Trace* tr = nullptr;
  for (const auto& t : traces)
    if (t.dir == label || fs::path(t.dir).filename() == fs::path(label).filename()) tr = &t;
  return tr;
}

model::Problem problem_of(const Trace& tr, const RunSettings& rs) {
  const TensorSpec spec{static_cast<uint64_t>(tr.meta.N), static_cast<uint32_t>(tr.meta.row_width), tr.meta.dtype};
  return model::Problem::of(spec, rs.n, rs.opt, rs.sparse_out);
}

/// Most bytes any rank sends / receives per call, as zen_perf reports them (per-rank mean over the
/// counted calls, rounded down, then the maximum over ranks).
std::pair<uint64_t, uint64_t> zen_perf_bytes(const Trace& tr, const RunSettings& rs, const std::string& scheme) {
  const model::Problem p = problem_of(tr, rs);
  const auto T = tr.sets.size();
  const auto un = static_cast<size_t>(rs.n);
  std::vector<model::Traffic> per_t(T);
  std::vector<bool> have(T, false);
  std::vector<uint64_t> sent(un, 0), recv(un, 0);
  uint64_t calls = 0;
  for (int k = rs.warmup; k < rs.warmup + rs.iters; ++k) {
    const size_t t = static_cast<size_t>(k) % T;
    if (!have[t]) {
      std::vector<std::vector<int64_t>> rows(tr.sets[t].begin(), tr.sets[t].begin() + rs.n);
      per_t[t] = model::traffic(scheme, p, model::count_exact(p, rows));
      have[t] = true;
    }
    for (size_t r = 0; r < un; ++r) {
      sent[r] += per_t[t].sent[r];
      recv[r] += per_t[t].recv[r];
    }
    ++calls;
  }
  uint64_t ms = 0, mr = 0;
  for (size_t r = 0; r < un; ++r) {
    ms = std::max(ms, sent[r] / std::max<uint64_t>(1, calls));
    mr = std::max(mr, recv[r] / std::max<uint64_t>(1, calls));
  }
  return {ms, mr};
}

// ---------------------------------------------------------------------------------------------
// Extrapolation of the union growth: Heaps' law U(m) = a * m^b fitted on the measured union of m
// records (m = 1..M, every record of the trace a batch, mean over shuffled orders).

struct Growth {
  double a = 0, b = 1;
  double at(double m, double cap) const { return std::min(cap, a * std::pow(m, b)); }
};

std::vector<double> measured_union(const std::vector<std::vector<int64_t>>& recs, int orders, uint64_t seed,
                                   uint64_t block) {
  const size_t M = recs.size();
  std::vector<double> U(M, 0.0);
  std::mt19937_64 g(seed);
  std::vector<size_t> ord(M);
  std::iota(ord.begin(), ord.end(), 0);
  for (int o = 0; o < orders; ++o) {
    if (o > 0) std::shuffle(ord.begin(), ord.end(), g);
    std::set<int64_t> u;
    for (size_t m = 0; m < M; ++m) {
      for (int64_t x : recs[ord[m]]) u.insert(x / static_cast<int64_t>(block));
      U[m] += static_cast<double>(u.size()) / orders;
    }
  }
  return U;
}

Growth fit(const std::vector<double>& U, size_t upto) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  size_t k = 0;
  for (size_t m = 0; m < std::min(upto, U.size()); ++m) {
    if (U[m] <= 0) continue;
    const double x = std::log(static_cast<double>(m + 1)), y = std::log(U[m]);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
    ++k;
  }
  Growth gr;
  if (k < 2) {
    gr.a = k ? std::exp(sy / static_cast<double>(k)) : 0.0;
    gr.b = 1.0;
    return gr;
  }
  const double kk = static_cast<double>(k);
  gr.b = (kk * sxy - sx * sy) / (kk * sxx - sx * sx);
  gr.a = std::exp((sy - gr.b * sx) / kk);
  return gr;
}

/// Share of `rows` (/ block) in each of n contiguous parts of [0, total).
std::vector<double> range_shares(const std::vector<int64_t>& rows, uint64_t total, int n, uint64_t block) {
  std::vector<double> s(static_cast<size_t>(n), 0.0);
  if (rows.empty() || total == 0) return s;
  std::set<int64_t> seen;
  for (int64_t x : rows) {
    const int64_t b = x / static_cast<int64_t>(block);
    if (!seen.insert(b).second) continue;
    const uint64_t q = total / static_cast<uint64_t>(n), rem = total % static_cast<uint64_t>(n), ub = static_cast<uint64_t>(b);
    const uint64_t o = ub < rem * (q + 1) ? ub / (q + 1) : rem + (ub - rem * (q + 1)) / std::max<uint64_t>(1, q);
    s[std::min<size_t>(o, s.size() - 1)] += 1.0;
  }
  for (double& x : s) x /= static_cast<double>(seen.size());
  return s;
}

std::vector<uint64_t> apportion(double total, const std::vector<double>& share) {
  std::vector<uint64_t> out(share.size());
  for (size_t i = 0; i < share.size(); ++i) out[i] = static_cast<uint64_t>(std::llround(total * share[i]));
  return out;
}

/// Counts for n ranks that each hold a record of mean size k, union U(m), per-range shares from the
/// trace; h0 owners get equal shares (Zen Thm 2).
model::Counts extrapolated_counts(const model::Problem& p, double k, const Growth& rows, const Growth& blocks,
                                  double k_blocks, const std::vector<int64_t>& all_rows,
                                  const std::vector<std::vector<int64_t>>& recs) {
  const int n = p.n;
  const auto un = static_cast<size_t>(n);
  const double R = static_cast<double>(p.rows);
  model::Counts c;
  c.k.assign(un, static_cast<uint64_t>(std::llround(k)));
  c.K = static_cast<uint64_t>(std::llround(rows.at(n, R)));
  const std::vector<double> even(un, 1.0 / n);
  c.bal_push.assign(un, apportion(k, even));
  c.bal_K = apportion(static_cast<double>(c.K), even);
  // Key ranges: the union's rows and a record's rows fall into the ranges as in the trace.
  std::vector<double> push_share(un, 0.0);
  for (const auto& r : recs) {
    const auto s = range_shares(r, p.rows, n, 1);
    for (size_t o = 0; o < un; ++o) push_share[o] += s[o] / static_cast<double>(recs.size());
  }
  c.ps_push.assign(un, apportion(k, push_share));
  c.ps_K = apportion(static_cast<double>(c.K), range_shares(all_rows, p.rows, n, 1));
  // SparCML: a state merges 2^s ranks (twice that with a fold partner).
  const int P = model::sparcml_ranks(n);
  int L = 0;
  while ((1 << L) < P) ++L;
  c.sc_state.assign(static_cast<size_t>(L) + 1, std::vector<uint64_t>(static_cast<size_t>(P), 0));
  for (int s = 0; s <= L; ++s)
    for (int r = 0; r < P; ++r)
      c.sc_state[static_cast<size_t>(s)][static_cast<size_t>(r)] =
          static_cast<uint64_t>(std::llround(rows.at(model::sparcml_members(n, s, r), R)));
  // OmniReduce: present blocks grow like the rows (own fit), spread over the ranges as in the trace.
  const uint64_t BR = std::max<uint64_t>(1, p.opt.block_size / p.D), NB = (p.rows + BR - 1) / BR;
  const double mask = static_cast<double>((BR + 7) / 8);
  std::vector<double> bshare(un, 0.0);
  for (const auto& r : recs) {
    const auto s = range_shares(r, NB, n, BR);
    for (size_t o = 0; o < un; ++o) bshare[o] += s[o] / static_cast<double>(recs.size());
  }
  const auto vshare = range_shares(all_rows, NB, n, BR);
  const double KB = blocks.at(n, static_cast<double>(NB));
  c.om_rows.assign(un, apportion(k_blocks * static_cast<double>(BR), bshare));
  c.om_mask.assign(un, apportion(k_blocks * mask, bshare));
  c.om_V_rows = apportion(KB * static_cast<double>(BR), vshare);
  c.om_V_mask = apportion(KB * mask, vshare);
  return c;
}

int run_scaling(const Trace& tr, const std::vector<int>& ns, const std::vector<double>& gbps, double alpha_us, double message_us,
                const SchemeOptions& opt, bool sparse_out, const std::string& csv, const std::string& png) {
  std::vector<std::vector<int64_t>> recs;
  for (const auto& it : tr.sets)
    for (const auto& r : it) recs.push_back(r);
  ZEN_ENFORCE(recs.size() >= 2, "--n: the trace needs at least 2 records to fit the union growth");
  const uint64_t R = static_cast<uint64_t>(tr.meta.items());
  const TensorSpec spec{static_cast<uint64_t>(tr.meta.N), static_cast<uint32_t>(tr.meta.row_width), tr.meta.dtype};
  const uint64_t BR = std::max<uint64_t>(1, opt.block_size / static_cast<uint64_t>(tr.meta.row_width));
  const auto U = measured_union(recs, 8, 7, 1), UB = measured_union(recs, 8, 7, BR);
  const Growth g = fit(U, U.size()), gb = fit(UB, UB.size());
  // Validation of the method on the trace itself: fit on the first half, predict the full union.
  const Growth half = fit(U, U.size() / 2);
  const double err = half.at(static_cast<double>(U.size()), static_cast<double>(R)) / U.back() - 1.0;
  double k = 0, kb = 0;
  std::vector<int64_t> all;
  for (const auto& r : recs) {
    k += static_cast<double>(r.size()) / static_cast<double>(recs.size());
    std::set<int64_t> b;
    for (int64_t x : r) b.insert(x / static_cast<int64_t>(BR));
    kb += static_cast<double>(b.size()) / static_cast<double>(recs.size());
    all.insert(all.end(), r.begin(), r.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::printf("# trace %s: R=%llu rows, D=%lld, %zu records of %.1f rows (mean)\n", tr.dir.c_str(),
              static_cast<unsigned long long>(R), static_cast<long long>(tr.meta.row_width), recs.size(), k);
  std::printf("# union growth (Heaps' law, least squares on log U(m) vs log m, m = 1..%zu, mean of 8 orders): "
              "U(m) = %.1f * m^%.3f; gamma(m) = U(m)/k\n",
              U.size(), g.a, g.b);
  std::printf("# check of the method: fitted on m <= %zu it predicts U(%zu) = %.0f, measured %.0f (%+.1f%%)\n",
              U.size() / 2, U.size(), half.at(static_cast<double>(U.size()), static_cast<double>(R)), U.back(), 100 * err);
  std::printf("# blocks of %llu rows: U_blocks(m) = %.1f * m^%.3f\n", static_cast<unsigned long long>(BR), gb.a, gb.b);
  // CSV rows, written grouped by (bandwidth, scheme) so that the plot joins each curve's points.
  std::map<std::pair<double, std::string>, std::string> by_curve;
  const std::vector<std::string> schemes{"dense_native", "allgather", "sparcml", "omnireduce", "sparse_ps", "balanced"};
  std::printf("%6s %6s %8s", "n", "Gb/s", "gamma");
  for (const auto& s : schemes) std::printf(" %13s", s.c_str());
  std::printf("   (predicted time / dense allreduce)\n");
  for (double bw : gbps)
    for (int n : ns) {
      const model::Problem p = model::Problem::of(spec, n, opt, sparse_out);
      const model::Counts c = extrapolated_counts(p, k, g, gb, kb, all, recs);
      const model::Link link{alpha_us * 1e-6, message_us * 1e-6, bw * 1e9 / 8.0, 0.0, {}};
      const double dense = model::predict("dense_native", p, c, link).seconds;
      const double gam = k > 0 ? static_cast<double>(c.K) / k : 0.0;
      std::printf("%6d %6.0f %8.2f", n, bw, gam);
      for (const auto& s : schemes) {
        const auto pr = model::predict(s, p, c, link);
        std::printf(" %13.4f", dense > 0 ? pr.seconds / dense : 0.0);
        std::ostringstream row;
        row << n << "," << bw << "," << s << "," << gam << "," << pr.max_bytes << "," << pr.seconds << ","
            << (dense > 0 ? pr.seconds / dense : 0.0) << "\n";
        by_curve[{bw, s}] += row.str();
      }
      std::printf("\n");
    }
  if (!csv.empty()) {
    std::ofstream out(csv);
    ZEN_ENFORCE(out.good(), "--csv: cannot write '" + csv + "'");
    out << "n,gbps,scheme,gamma,max_bytes,seconds,vs_dense\n";
    for (double bw : gbps)
      for (const auto& sc : schemes) out << by_curve[{bw, sc}];
  }
  if (!png.empty()) {
    ZEN_ENFORCE(!csv.empty(), "--png needs --csv (the plot reads it)");
    const std::string gp = trace::find_gnuplot();
    if (gp.empty() || gp == "none") {
      std::fprintf(stderr, "zen_model: warning: gnuplot not found; %s not written (apt-get install gnuplot-nox)\n", png.c_str());
      return 0;
    }
    const fs::path script = fs::path(png).replace_extension(".gp");
    std::ofstream s(script);
    s << "set datafile separator ','\nset terminal pngcairo noenhanced size 1200,480 font ',10'\nset output '" << png << "'\n"
      << "set multiplot layout 1," << gbps.size() << " title 'zen cost model: " << fs::path(tr.dir).filename().string()
      << ", predicted time / dense allreduce'\nset logscale x 2\nset logscale y 10\nset key top left\n"
      << "set xlabel 'ranks n'\nset ylabel 'time / dense allreduce'\nset grid\n";
    for (double bw : gbps) {
      s << "set title '" << bw << " Gb/s'\nplot ";
      for (size_t i = 0; i < schemes.size(); ++i)
        s << (i ? ", " : "") << "'" << csv << "' using ($2==" << bw << " && strcol(3) eq '" << schemes[i]
          << "' ? $1 : 1/0):7 with linespoints title '" << schemes[i] << "'";
      s << "\n";
    }
    s << "unset multiplot\n";
    s.close();
    const std::string cmd = "'" + gp + "' '" + script.string() + "'";
    const int rc = std::system(cmd.c_str());
    ZEN_ENFORCE(rc == 0, "gnuplot failed on " + script.string());
    std::printf("# wrote %s (%s)\n", png.c_str(), script.string().c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// --check: the model against zen_perf's measured bytes.

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

// ---------------------------------------------------------------------------------------------
// The calibrated time of a call: alpha per message round, beta per byte of the busiest rank, and a
// compute cost per row the busiest rank touches (per scheme).

/// Message rounds of a call at n ranks; 0 for a scheme the calibration does not know.
double rounds_of(const std::string& scheme, int n) {
  const double lg = std::ceil(std::log2(std::max(1, n)));
  if (scheme == "balanced" || scheme == "sparse_ps") return 3.0 * (n - 1) + lg;
  if (scheme == "allgather" || scheme == "mpi_allgatherv") return (n - 1) + lg;
  if (scheme == "dense_native" || scheme == "mpi_allreduce" || scheme == "dense") return 2.0 * (n - 1);
  return 0.0;
}

/// Rows touched on the busiest rank, from the row's density (k = density * size per rank) and gamma
/// (the union K = gamma * k).
double work_of(const std::string& scheme, int n, double density, double gamma, double size) {
  const double k = density * size, K = gamma * k;
  if (scheme == "allgather" || scheme == "mpi_allgatherv") return k + n * k;
  if (scheme == "balanced" || scheme == "sparse_ps") return 2 * k + K;
  return k + size;
}

struct Calibration {
  int n = 0;
  double alpha = 0, beta = 0;
  std::map<std::string, double> per_row;  ///< seconds per row touched, per scheme
};

// ---------------------------------------------------------------------------------------------
// --calibrate: alpha and beta from the dense rows of a zen_perf run, then a compute cost per row.

int run_calibrate(const std::string& perf_json, const std::string& compute_from, const std::string& save) {
  std::ifstream f(perf_json);
  ZEN_ENFORCE(f.good(), "--calibrate: cannot read '" + perf_json + "'");
  const json j = json::parse(f);
  const int n = j.at("ranks").get<int>();
  ZEN_ENFORCE(n > 1, "--calibrate: needs a run with at least 2 ranks");
  const json& cf = j.at("config");
  const bool sparse_out = cf.value("output", std::string("dense")) == "sparse";
  struct Pt {
    std::string scheme;
    double bytes, steps, seconds, density, gamma, size;
  };
  std::vector<Pt> pts;
  const std::string dense_name = [&] {
    for (const auto& r : j.at("rows"))
      if (r.at("scheme") == "mpi_allreduce") return std::string("mpi_allreduce");
    return std::string("dense_native");
  }();
  auto read_pts = [](const json& run) {
    std::vector<Pt> v;
    for (const auto& r : run.at("rows")) {
      Pt p;
      p.scheme = r.at("scheme").get<std::string>();
      p.bytes = static_cast<double>(std::max(r.at("sent_B").get<uint64_t>(), r.at("recv_B").get<uint64_t>()));
      p.seconds = r.at("time_us").get<double>() * 1e-6;
      p.density = r.at("density").get<double>();
      p.gamma = r.value("gamma", 1.0);
      p.size = r.at("count").get<double>();
      v.push_back(p);
    }
    return v;
  };
  pts = read_pts(j);
  // Dense: t = alpha * 2(n-1) + beta * bytes, least squares on relative errors (weights 1/t^2)
  // so that small sizes count as much as large ones.
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  int m = 0;
  const double rounds_dense = 2.0 * (n - 1);
  for (const auto& p : pts)
    if (p.scheme == dense_name) {
      const double w = 1.0 / (p.seconds * p.seconds), x1 = rounds_dense, x2 = p.bytes;
      s11 += w * x1 * x1, s12 += w * x1 * x2, s22 += w * x2 * x2, s1y += w * x1 * p.seconds, s2y += w * x2 * p.seconds;
      ++m;
    }
  ZEN_ENFORCE(m >= 2, "--calibrate: needs " + dense_name + " at 2 or more sizes (zen_perf -b ... -e ... -f ...)");
  const double det = s11 * s22 - s12 * s12;
  double alpha = det != 0 ? (s1y * s22 - s2y * s12) / det : 0.0;
  double beta = det != 0 ? (s11 * s2y - s12 * s1y) / det : s2y / s22;
  if (alpha < 0) {  // no latency term fits: bandwidth only
    alpha = 0;
    beta = s2y / s22;
  }
  std::printf("# calibration from %s (%s at %d sizes, n=%d; weighted least squares on relative error):\n"
              "#   alpha = %.2f us per round (ring: %.0f rounds), beta = %.3g s/B (%.2f GB/s per rank)\n",
              perf_json.c_str(), dense_name.c_str(), m, n, alpha * 1e6, rounds_dense, beta, beta > 0 ? 1e-9 / beta : 0.0);
  // Per scheme: the residual per row touched, least squares through the origin; on the rows of
  // --compute-from when given (e.g. the trace run itself: rows of D values, its overlap), else here.
  std::vector<Pt> cpts = pts;
  int cn = n;
  if (!compute_from.empty()) {
    std::ifstream fc(compute_from);
    ZEN_ENFORCE(fc.good(), "--compute-from: cannot read '" + compute_from + "'");
    const json jc = json::parse(fc);
    cpts = read_pts(jc);
    cn = jc.at("ranks").get<int>();
    std::printf("# compute per row from %s (n=%d)\n", compute_from.c_str(), cn);
  }
  Calibration cal;
  cal.n = cn, cal.alpha = alpha, cal.beta = beta;
  std::printf("%16s %14s %12s %12s %12s %8s\n", "scheme", "ns/row", "count", "measured_us", "model_us", "error");
  for (const std::string scheme : {"allgather", "balanced", "dense", "dense_native", "mpi_allgatherv", "mpi_allreduce",
                                   "sparse_ps"}) {
    const double steps = rounds_of(scheme, cn);
    double num = 0, den = 0;
    std::vector<const Pt*> mine;
    for (const auto& p : cpts)
      if (p.scheme == scheme) mine.push_back(&p);
    if (mine.empty()) continue;
    auto work = [&](const Pt& p) { return work_of(scheme, cn, p.density, p.gamma, p.size); };
    for (const Pt* p : mine) {  // relative-error weights, as above
      const double rest = p->seconds - alpha * steps - beta * p->bytes, w = 1.0 / (p->seconds * p->seconds);
      num += w * rest * work(*p);
      den += w * work(*p) * work(*p);
    }
    const double c = den > 0 ? std::max(0.0, num / den) : 0.0;
    cal.per_row[scheme] = c;
    for (const Pt* p : mine) {
      const double model_s = alpha * steps + beta * p->bytes + c * work(*p);
      std::printf("%16s %14.2f %12.0f %12.1f %12.1f %+7.0f%%\n", scheme.c_str(), c * 1e9, p->size, p->seconds * 1e6,
                  model_s * 1e6, 100.0 * (model_s / p->seconds - 1.0));
    }
  }
  (void)sparse_out;
  if (!save.empty()) {
    json out = {{"from", perf_json}, {"ranks", cal.n}, {"alpha_s", cal.alpha}, {"beta_s_per_B", cal.beta}};
    for (const auto& [scheme, c] : cal.per_row) out["s_per_row"][scheme] = c;
    std::ofstream(save) << out.dump(2) << "\n";
    std::printf("# wrote %s\n", save.c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// --predict: a zen_perf trace run at another rank count against the calibration's time. Bytes are
// the model's own (exact, --check); for the raw MPI baselines, which the model does not cover, the
// run's measured bytes.

int run_predict(const std::vector<Trace>& traces, const std::string& perf_json, const std::string& cal_json,
                double within) {
  std::ifstream fc(cal_json);
  ZEN_ENFORCE(fc.good(), "--calibration: cannot read '" + cal_json + "'");
  const json c = json::parse(fc);
  Calibration cal;
  cal.n = c.at("ranks").get<int>();
  cal.alpha = c.at("alpha_s").get<double>();
  cal.beta = c.at("beta_s_per_B").get<double>();
  for (const auto& [k, v] : c.at("s_per_row").items()) cal.per_row[k] = v.get<double>();
  std::ifstream f(perf_json);
  ZEN_ENFORCE(f.good(), "--predict: cannot read '" + perf_json + "'");
  const json j = json::parse(f);
  const RunSettings rs = settings_of(j);
  std::printf("# zen_model --predict %s with %s (calibrated at n=%d: alpha %.2f us per round, %.2f GB/s): n=%d output=%s\n",
              perf_json.c_str(), cal_json.c_str(), cal.n, cal.alpha * 1e6, cal.beta > 0 ? 1e-9 / cal.beta : 0.0, rs.n,
              rs.sparse_out ? "sparse" : "dense");
  std::printf("%16s %8s %12s %12s %12s %12s %12s %8s %7s\n", "scheme", "bytes", "busiest_B", "alpha_us", "beta_us",
              "compute_us", "model_us", "measured_us", "error");
  int compared = 0, inside = 0;
  for (const auto& row : j.at("rows")) {
    const std::string scheme = row.at("scheme").get<std::string>();
    const auto cit = cal.per_row.find(scheme);
    if (cit == cal.per_row.end() || rounds_of(scheme, rs.n) == 0) continue;
    const std::string label = row.value("trace", std::string());
    const Trace* tr = trace_of(traces, label);
    if (!tr) continue;
    ZEN_ENFORCE(tr->meta.ranks >= rs.n, "--predict: the trace has fewer ranks than the run");
    uint64_t bytes = 0;
    const bool modelled = model::covers(scheme);
    if (modelled) {
      const auto [ms, mr] = zen_perf_bytes(*tr, rs, scheme);
      bytes = std::max(ms, mr);
    } else {
      bytes = std::max(row.at("sent_B").get<uint64_t>(), row.at("recv_B").get<uint64_t>());
    }
    const double a = cal.alpha * rounds_of(scheme, rs.n), b = cal.beta * static_cast<double>(bytes),
                 w = cit->second * work_of(scheme, rs.n, row.at("density").get<double>(), row.value("gamma", 1.0),
                                           row.at("count").get<double>());
    const double model_us = (a + b + w) * 1e6, measured_us = row.at("time_us").get<double>();
    const double err = model_us / measured_us - 1.0;
    ++compared;
    inside += std::abs(err) <= within ? 1 : 0;
    std::printf("%16s %8s %12llu %12.1f %12.1f %12.1f %12.1f %12.1f %+6.0f%%\n", scheme.c_str(), modelled ? "model" : "measured",
                static_cast<unsigned long long>(bytes), a * 1e6, b * 1e6, w * 1e6, model_us, measured_us, 100 * err);
  }
  ZEN_ENFORCE(compared > 0, "--predict: no row of '" + perf_json + "' is a calibrated scheme on the given trace(s)");
  std::printf("# %d of %d rows within %.0f %%\n", inside, compared, 100 * within);
  return 0;
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  for (const auto& x : split(s)) v.push_back(std::stoi(x));
  return v;
}
std::vector<double> parse_doubles(const std::string& s) {
  std::vector<double> v;
  for (const auto& x : split(s)) v.push_back(std::stod(x));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen_model: the cost model of zen's schemes on a trace (bytes, time, scaling)"};
  std::string traces, ranks, check, calibrate, save, predict, calibration, nlist, gbps = "25,100", csv, png, pull = "auto", push = "auto", output = "sparse";
  double alpha_us = 20.0, message_us = 1.0;
  uint64_t seed = 42;
  uint32_t block_size = 256;
  double sparcml_switch = 0.0;
  app.add_option("--trace", traces, "trace directory (comma list for --check)");
  app.add_option("--ranks", ranks, "rank counts for the byte table (default: 2..min(8, trace ranks))");
  app.add_option("--check", check, "zen_perf --json output to compare with (its settings are used)");
  app.add_option("--calibrate", calibrate, "zen_perf --json output of this machine: fit alpha, beta and compute costs");
  std::string compute_from;
  app.add_option("--compute-from", compute_from, "with --calibrate: fit the compute per row on this zen_perf run's rows");
  app.add_option("--save", save, "with --calibrate: write the calibration (JSON) for --predict");
  app.add_option("--predict", predict, "zen_perf --json output of a trace run to predict (needs --calibration, --trace)");
  app.add_option("--calibration", calibration, "the --save output of --calibrate");
  double within = 0.25;
  app.add_option("--within", within, "with --predict: the relative error counted as a hit (default 0.25)");
  app.add_option("--n", nlist, "rank counts to extrapolate to, e.g. 2,4,8,...,1024");
  app.add_option("--gbps", gbps, "per-rank bandwidths for --n, Gb/s (comma list)");
  app.add_option("--alpha-us", alpha_us, "latency per message round for --n, microseconds");
  app.add_option("--message-us", message_us, "overhead per message for --n, microseconds");
  app.add_option("--csv", csv, "write the --n table as CSV");
  app.add_option("--png", png, "plot the --n table (gnuplot)");
  app.add_option("--seed", seed, "h0 seed (zen_perf's --seed; default 42 like zen_perf)");
  app.add_option("--pull", pull, "pull encoding: auto, coo, bitmap or ef");
  app.add_option("--push", push, "push encoding: auto, coo, bitmap or ef");
  app.add_option("--output", output, "result form: sparse or dense");
  app.add_option("--block-size", block_size, "omnireduce block size in values");
  app.add_option("--sparcml-switch", sparcml_switch, "sparcml dense switch density (0 = byte break-even)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!calibrate.empty()) return run_calibrate(calibrate, compute_from, save);
    ZEN_ENFORCE(!traces.empty(), "--trace DIR is required (or --calibrate PERF.json)");
    std::vector<Trace> trs;
    for (const auto& d : split(traces)) trs.push_back(load(d));
    if (!check.empty()) return run_check(trs, check);
    if (!predict.empty()) {
      ZEN_ENFORCE(!calibration.empty(), "--predict needs --calibration CAL.json (zen_model --calibrate PERF.json --save CAL.json)");
      return run_predict(trs, predict, calibration, within);
    }
    SchemeOptions opt;
    opt.seed = seed;
    opt.pull = parse_index_encoding(pull);
    opt.push = parse_index_encoding(push);
    opt.block_size = block_size;
    opt.sparcml_dense_switch = sparcml_switch;
    ZEN_ENFORCE(output == "sparse" || output == "dense", "--output must be sparse or dense");
    if (!nlist.empty()) return run_scaling(trs.front(), parse_ints(nlist), parse_doubles(gbps), alpha_us, message_us, opt, output == "sparse", csv, png);
    const Trace& tr = trs.front();
    std::vector<int> ns = ranks.empty() ? std::vector<int>{} : parse_ints(ranks);
    if (ns.empty())
      for (int n = 2; n <= std::min(8, tr.meta.ranks); ++n) ns.push_back(n);
    std::printf("# zen_model: %s, output %s, pull %s, seed %llu; bytes per call (most any rank sends / receives), mean over "
                "the trace's %d iterations\n",
                tr.dir.c_str(), output.c_str(), pull.c_str(), static_cast<unsigned long long>(seed), tr.meta.iterations);
    const double bw0 = parse_doubles(gbps).front();
    const model::Link link{alpha_us * 1e-6, message_us * 1e-6, bw0 * 1e9 / 8.0, 0.0, {}};
    std::printf("# predicted time: first iteration, alpha %.1f us per round, %.1f us per message, %.0f Gb/s per rank\n", alpha_us,
                message_us, bw0);
    std::printf("%4s %14s %14s %14s %14s\n", "n", "scheme", "sent_B", "recv_B", "predicted_us");
    for (int n : ns) {
      ZEN_ENFORCE(n >= 1 && n <= tr.meta.ranks, "--ranks: " + std::to_string(n) + " is outside [1, " + std::to_string(tr.meta.ranks) + "]");
      RunSettings rs;
      rs.n = n;
      rs.opt = opt;
      rs.sparse_out = output == "sparse";
      rs.warmup = 0;
      rs.iters = tr.meta.iterations;
      const model::Problem p = problem_of(tr, rs);
      const std::vector<std::vector<int64_t>> first(tr.sets[0].begin(), tr.sets[0].begin() + n);
      const model::Counts c0 = model::count_exact(p, first);
      for (const auto& s : scheme_names()) {
        const auto [ms, mr] = zen_perf_bytes(tr, rs, s);
        std::printf("%4d %14s %14llu %14llu %14.1f\n", n, s.c_str(), static_cast<unsigned long long>(ms),
                    static_cast<unsigned long long>(mr), model::predict(s, p, c0, link).seconds * 1e6);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zen_model: %s\n", e.what());
    return 1;
  }
}
