// zen_model: --n, the model's time beyond the trace's rank count.
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

namespace {

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
}  // namespace

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

}  // namespace zen_model
