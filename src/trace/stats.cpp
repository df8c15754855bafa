// Trace characterization: density, overlap, densification, skew; table, JSON and gnuplot PNGs.
#include "zen/trace/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "zen/error.hpp"
#include "zen/hash/hash.hpp"

namespace fs = std::filesystem;

namespace zen::trace {

Summary summarize(std::vector<double> v) {
  Summary s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(ss / (v.size() - 1)) : 0.0;
  auto q = [&](double p) {
    const double pos = p * (v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - lo) * (v[hi] - v[lo]);
  };
  s.min = v.front();
  s.max = v.back();
  s.p10 = q(0.1);
  s.median = q(0.5);
  s.p90 = q(0.9);
  return s;
}

namespace {

double skew_of(const std::vector<int64_t>& load) {
  int64_t total = 0, mx = 0;
  for (int64_t l : load) {
    total += l;
    mx = std::max(mx, l);
  }
  return total == 0 ? 0.0 : static_cast<double>(mx) * load.size() / static_cast<double>(total);
}

struct Accum {
  TraceStats s;
  std::vector<uint32_t> mark;  // per item: iteration stamp + 1 when in the union
  Partitioner part;
  int64_t items = 0;
  int used_iters = 0;
  std::vector<double> gamma_sum, lc_sum, lh_sum;
  double push_c = 0, push_h = 0, pull_c = 0, pull_h = 0, union_d = 0, push_first = 0;
  std::vector<double> dens_rank_sum;
  std::vector<double> all_dens;

  uint32_t contiguous(int64_t i) const {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(i) * s.parts) / static_cast<uint64_t>(items));
  }

  void add_iteration(std::vector<std::vector<int64_t>> sets) {
    const int n = s.ranks;
    const uint32_t stamp = static_cast<uint32_t>(used_iters + 1);
    std::vector<double> sizes(n);
    double dsum = 0;
    for (int r = 0; r < n; ++r) {
      auto& v = sets[r];
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      sizes[r] = static_cast<double>(v.size());
      const double d = sizes[r] / items;
      dens_rank_sum[r] += d;
      all_dens.push_back(d);
      dsum += d;
    }
    s.density_per_iteration.push_back(dsum / n);
    // Pairwise overlap.
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        const auto &A = sets[a], &B = sets[b];
        if (A.empty() || B.empty()) continue;
        size_t i = 0, j = 0, c = 0;
        while (i < A.size() && j < B.size()) {
          if (A[i] < B[j]) ++i;
          else if (B[j] < A[i]) ++j;
          else { ++c; ++i; ++j; }
        }
        s.overlaps.push_back(static_cast<double>(c) / std::min(A.size(), B.size()));
      }
    // Densification, push and pull loads.
    std::vector<int64_t> pull_c_load(s.parts, 0), pull_h_load(s.parts, 0), lc(s.parts), lh(s.parts);
    int64_t uni = 0;
    double size_sum = 0;
    for (int r = 0; r < n; ++r) {
      std::fill(lc.begin(), lc.end(), 0);
      std::fill(lh.begin(), lh.end(), 0);
      for (int64_t i : sets[r]) {
        const uint32_t pc = contiguous(i), ph = part.owner(static_cast<uint64_t>(i));
        ++lc[pc];
        ++lh[ph];
        if (mark[i] != stamp) {
          mark[i] = stamp;
          ++uni;
          ++pull_c_load[pc];
          ++pull_h_load[ph];
        }
      }
      push_c += skew_of(lc) / n;
      if (!sets[r].empty()) push_first += static_cast<double>(lc[0]) / sets[r].size() / n;
      push_h += skew_of(lh) / n;
      size_sum += sizes[r];
      const double mean_local = size_sum / (r + 1);
      gamma_sum[r] += mean_local > 0 ? static_cast<double>(uni) / mean_local : 0.0;
    }
    union_d += static_cast<double>(uni) / items;
    pull_c += skew_of(pull_c_load);
    pull_h += skew_of(pull_h_load);
    for (int p = 0; p < s.parts; ++p) {
      lc_sum[p] += uni ? static_cast<double>(pull_c_load[p]) / uni : 0.0;
      lh_sum[p] += uni ? static_cast<double>(pull_h_load[p]) / uni : 0.0;
    }
    ++used_iters;
  }

  void init(const TraceMeta& meta, const StatsConfig& cfg) {
    validate_meta(meta);
    ZEN_ENFORCE(cfg.ranks >= 0 && cfg.ranks <= meta.ranks, "stats: ranks = " + std::to_string(cfg.ranks) +
                                                               " out of range [0, " + std::to_string(meta.ranks) + "]");
    ZEN_ENFORCE(cfg.parts >= 0, "stats: parts must be >= 0, got " + std::to_string(cfg.parts));
    ZEN_ENFORCE(cfg.hist_bins > 0, "stats: hist_bins must be positive, got " + std::to_string(cfg.hist_bins));
    s.meta = meta;
    s.ranks = cfg.ranks ? cfg.ranks : meta.ranks;
    s.iterations = cfg.max_iterations > 0 ? std::min(cfg.max_iterations, meta.iterations) : meta.iterations;
    s.parts = cfg.parts ? cfg.parts : s.ranks;
    s.seed = cfg.seed;
    items = meta.items();
    ZEN_ENFORCE(s.parts <= items, "stats: parts = " + std::to_string(s.parts) + " exceeds items " + std::to_string(items));
    part = Partitioner::make(static_cast<uint64_t>(items), static_cast<uint32_t>(s.parts), cfg.seed);
    mark.assign(static_cast<size_t>(items), 0);
    gamma_sum.assign(s.ranks, 0.0);
    dens_rank_sum.assign(s.ranks, 0.0);
    lc_sum.assign(s.parts, 0.0);
    lh_sum.assign(s.parts, 0.0);
  }

  TraceStats finish(const StatsConfig& cfg) {
    const double T = used_iters;
    for (int r = 0; r < s.ranks; ++r) {
      s.density_per_rank.push_back(dens_rank_sum[r] / T);
      s.gamma.push_back(gamma_sum[r] / T);
    }
    s.density = summarize(all_dens);
    s.overlap = summarize(s.overlaps);
    s.overlap_hist.assign(cfg.hist_bins, 0.0);
    if (!s.overlaps.empty()) {
      s.hist_lo = std::max(0.0, std::floor(s.overlap.min * 10) / 10);
      s.hist_hi = std::min(1.0, std::ceil(s.overlap.max * 10) / 10);
      if (s.hist_hi <= s.hist_lo) {
        s.hist_lo = std::max(0.0, s.hist_hi - 0.1);
        s.hist_hi = s.hist_lo + 0.1;
      }
    }
    for (double o : s.overlaps) {
      int b = static_cast<int>((o - s.hist_lo) / (s.hist_hi - s.hist_lo) * cfg.hist_bins);
      b = std::clamp(b, 0, cfg.hist_bins - 1);
      s.overlap_hist[b] += 1.0 / s.overlaps.size();
    }
    s.union_density = union_d / T;
    s.push_skew_contiguous = push_c / T;
    s.push_skew_hash = push_h / T;
    s.pull_skew_contiguous = pull_c / T;
    s.pull_skew_hash = pull_h / T;
    for (int p = 0; p < s.parts; ++p) {
      s.load_contiguous.push_back(lc_sum[p] / T);
      s.load_hash.push_back(lh_sum[p] / T);
    }
    s.first_part_share = s.load_contiguous.empty() ? 0.0 : s.load_contiguous[0];
    s.push_first_part_share = push_first / T;
    return std::move(s);
  }
};

}  // namespace

TraceStats compute_stats(const std::string& dir, const StatsConfig& cfg) {
  const TraceMeta meta = read_meta(dir);
  Accum acc;
  acc.init(meta, cfg);
  for (int t = 0; t < acc.s.iterations; ++t) {
    std::vector<std::vector<int64_t>> sets(acc.s.ranks);
    for (int r = 0; r < acc.s.ranks; ++r) sets[r] = read_rank_indices(dir, meta, r, t);
    acc.add_iteration(std::move(sets));
  }
  return acc.finish(cfg);
}

TraceStats compute_stats(const TraceMeta& meta, const std::vector<std::vector<std::vector<int64_t>>>& sets,
                         const StatsConfig& cfg) {
  Accum acc;
  acc.init(meta, cfg);
  ZEN_ENFORCE(static_cast<int>(sets.size()) >= acc.s.iterations,
              "stats: " + std::to_string(sets.size()) + " iterations given, " + std::to_string(acc.s.iterations) +
                  " needed");
  for (int t = 0; t < acc.s.iterations; ++t) {
    ZEN_ENFORCE(static_cast<int>(sets[t].size()) >= acc.s.ranks,
                "stats: iteration " + std::to_string(t) + " has " + std::to_string(sets[t].size()) + " ranks, " +
                    std::to_string(acc.s.ranks) + " needed");
    std::vector<std::vector<int64_t>> it(sets[t].begin(), sets[t].begin() + acc.s.ranks);
    for (const auto& v : it)
      for (int64_t i : v)
        ZEN_ENFORCE(i >= 0 && i < meta.items(),
                    "stats: index " + std::to_string(i) + " out of range [0, " + std::to_string(meta.items()) + ")");
    acc.add_iteration(std::move(it));
  }
  return acc.finish(cfg);
}

nlohmann::json stats_to_json(const TraceStats& s) {
  auto sj = [](const Summary& m) {
    return nlohmann::json{{"mean", m.mean}, {"stddev", m.stddev}, {"min", m.min}, {"p10", m.p10},
                          {"median", m.median}, {"p90", m.p90}, {"max", m.max}, {"count", m.count}};
  };
  nlohmann::json j;
  j["trace"] = {{"N", s.meta.N},         {"ranks", s.meta.ranks}, {"iterations", s.meta.iterations},
                {"dtype", dtype_name(s.meta.dtype)}, {"row_width", s.meta.row_width}, {"source", s.meta.source}};
  j["ranks_used"] = s.ranks;
  j["iterations_used"] = s.iterations;
  j["parts"] = s.parts;
  j["h0_seed"] = s.seed;
  j["density"] = sj(s.density);
  j["density_per_rank"] = s.density_per_rank;
  j["density_per_iteration"] = s.density_per_iteration;
  j["overlap"] = sj(s.overlap);
  j["overlap_hist"] = {{"lo", s.hist_lo}, {"hi", s.hist_hi}, {"fraction", s.overlap_hist}};
  nlohmann::json g = nlohmann::json::array();
  for (size_t k = 0; k < s.gamma.size(); ++k) g.push_back({{"k", k + 1}, {"gamma", s.gamma[k]}});
  j["gamma"] = g;
  j["union_density"] = s.union_density;
  j["skew"] = {{"push_contiguous", s.push_skew_contiguous}, {"push_hash", s.push_skew_hash},
               {"pull_contiguous", s.pull_skew_contiguous}, {"pull_hash", s.pull_skew_hash},
               {"first_part_share_pull", s.first_part_share}, {"first_part_share_push", s.push_first_part_share}};
  j["load_contiguous"] = s.load_contiguous;
  j["load_hash"] = s.load_hash;
  return j;
}

std::string stats_table(const TraceStats& s) {
  std::ostringstream os;
  os << std::fixed;
  os << "trace: N=" << s.meta.N << " ranks=" << s.meta.ranks << " iterations=" << s.meta.iterations
     << " dtype=" << dtype_name(s.meta.dtype) << " row_width=" << s.meta.row_width << "\n";
  os << "source: " << s.meta.source << "\n";
  os << "using n=" << s.ranks << " ranks, T=" << s.iterations << " iterations, " << s.parts
     << " partitions, h0 seed=0x" << std::hex << s.seed << std::dec << "\n\n";
  auto pct = [](double x) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(3) << 100 * x << "%";
    return o.str();
  };
  os << std::setprecision(4);
  os << "characteristic                          value\n";
  os << "--------------------------------------  ------------------------------------------\n";
  os << "local density  (mean, min..max)         " << pct(s.density.mean) << "  (" << pct(s.density.min) << " .. "
     << pct(s.density.max) << ")\n";
  os << "aggregated density (union of n)         " << pct(s.union_density) << "\n";
  os << "pairwise overlap |I1nI2|/min            mean " << s.overlap.mean << "  sd " << s.overlap.stddev << "  min "
     << s.overlap.min << "  p10 " << s.overlap.p10 << "  median " << s.overlap.median << "  p90 " << s.overlap.p90
     << "  max " << s.overlap.max << "  (" << s.overlap.count << " pairs)\n";
  os << "densification gamma_n                   " << (s.gamma.empty() ? 0.0 : s.gamma.back()) << "  (n = " << s.ranks
     << ")\n";
  os << "skew, pull (union): contiguous / h0     " << s.pull_skew_contiguous << " / " << s.pull_skew_hash << "\n";
  os << "skew, push (per rank): contiguous / h0  " << s.push_skew_contiguous << " / " << s.push_skew_hash << "\n";
  os << "share in first contiguous range         pull " << pct(s.first_part_share) << "  push "
     << pct(s.push_first_part_share) << "\n\n";
  os << "k    gamma(k)\n";
  for (size_t k = 1; k < s.gamma.size(); ++k) os << std::setw(3) << k + 1 << "  " << s.gamma[k] << "\n";
  os << "\nrank  density\n";
  for (size_t r = 0; r < s.density_per_rank.size(); ++r)
    os << std::setw(4) << r << "  " << pct(s.density_per_rank[r]) << "\n";
  os << "\npart  share(contiguous)  share(h0)\n";
  for (int p = 0; p < s.parts; ++p)
    os << std::setw(4) << p << "  " << std::setw(17) << pct(s.load_contiguous[p]) << "  " << std::setw(9)
       << pct(s.load_hash[p]) << "\n";
  return os.str();
}

std::string find_gnuplot() {
  if (const char* env = std::getenv("ZEN_GNUPLOT")) return env;  // "" or "none" disables plots
  if (const char* path = std::getenv("PATH")) {
    std::string p(path);
    size_t start = 0;
    while (start <= p.size()) {
      const size_t end = p.find(':', start);
      const std::string d = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!d.empty() && fs::exists(fs::path(d) / "gnuplot")) return (fs::path(d) / "gnuplot").string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return fs::exists("/usr/bin/gnuplot") ? "/usr/bin/gnuplot" : "";
}

namespace {

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream o(p);
  ZEN_CHECK_CODE(o.good(), Result::SystemError, "cannot write '" + p.string() + "'");
  o << s;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::vector<std::string> write_stats_outputs(const TraceStats& s, const std::string& out_dir) {
  const fs::path out(out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  ZEN_CHECK_CODE(!ec, Result::SystemError, "cannot create '" + out_dir + "': " + ec.message());
  write_text(out / "stats.json", stats_to_json(s).dump(2) + "\n");
  write_text(out / "stats.txt", stats_table(s));
  {
    std::ostringstream o;
    o << "# bin_center fraction_of_pairs\n";
    const size_t B = s.overlap_hist.size();
    for (size_t b = 0; b < B; ++b)
      o << s.hist_lo + (b + 0.5) / B * (s.hist_hi - s.hist_lo) << " " << s.overlap_hist[b] << "\n";
    write_text(out / "overlap_hist.dat", o.str());
  }
  {
    std::ostringstream o;
    o << "# k gamma(k)\n";
    for (size_t k = 0; k < s.gamma.size(); ++k) o << k + 1 << " " << s.gamma[k] << "\n";
    write_text(out / "gamma.dat", o.str());
  }
  {
    std::ostringstream o;
    o << "# part share_contiguous share_h0\n";
    for (int p = 0; p < s.parts; ++p) o << p << " " << s.load_contiguous[p] << " " << s.load_hash[p] << "\n";
    write_text(out / "skew.dat", o.str());
  }
  {
    std::ostringstream o;
    o << "# rank density\n";
    for (size_t r = 0; r < s.density_per_rank.size(); ++r) o << r << " " << s.density_per_rank[r] << "\n";
    write_text(out / "density.dat", o.str());
  }

  const std::string gp = find_gnuplot();
  if (gp.empty() || gp == "none") {
    std::cerr << "zen_trace stats: warning: gnuplot not found; PNG plots skipped (data files written to " << out_dir
              << ")\n";
    return {};
  }
  const std::vector<std::string> pngs = {"overlap.png", "densification.png", "skew.png", "density.png"};
  std::ostringstream g;
  g << std::setprecision(6);
  g << "set terminal pngcairo size 800,520 font 'sans,11'\n"
       "set grid ytics lc rgb '#dddddd'\nset border 3\nset tics nomirror\nset key top left\n";
  g << "set output '" << pngs[0] << "'\n"
    << "set title 'Pairwise overlap |I_1 ∩ I_2| / min(|I_1|,|I_2|)  (mean " << s.overlap.mean << ", n=" << s.ranks
    << ")'\nset xlabel 'overlap ratio'\nset ylabel 'fraction of rank pairs'\nset xrange [" << s.hist_lo << ":" << s.hist_hi
    << "]\nset yrange [0:*]\nset style fill solid 0.8 border -1\nset boxwidth "
    << (s.hist_hi - s.hist_lo) / std::max<size_t>(1, s.overlap_hist.size()) * 0.9
    << "\nplot 'overlap_hist.dat' using 1:2 with boxes lc rgb '#3b6ea5' notitle\n";
  g << "set output '" << pngs[1] << "'\nunset xrange\nunset yrange\n"
    << "set title 'Densification γ(k) = |∪_{r<k} I_r| / mean |I_r|'\nset xlabel 'ranks summed k'\n"
       "set ylabel 'γ(k)'\nset xrange [1:"
    << std::max(2, s.ranks) << "]\nset yrange [0:" << std::max(2, s.ranks) + 1 << "]\n"
    << "plot 'gamma.dat' using 1:2 with linespoints lw 2 pt 7 lc rgb '#c0392b' title 'trace', "
       "x with lines dt 2 lc rgb '#777777' title 'no overlap (γ=k)', 1 with lines dt 3 lc rgb '#777777' "
       "title 'full overlap (γ=1)'\n";
  g << "set output '" << pngs[2] << "'\nunset xrange\nset yrange [0:*]\n"
    << "set title 'Share of aggregated non-zeros per partition: contiguous s=" << s.pull_skew_contiguous
    << ", h0 s=" << s.pull_skew_hash << "'\nset xlabel 'partition'\nset ylabel 'share of non-zeros'\n"
    << "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
       "set boxwidth 0.9 relative\nset key top right\nset xtics 1\n"
       "plot 'skew.dat' using 2:xtic(1) lc rgb '#c0392b' title 'contiguous ranges', '' using 3 lc rgb '#3b6ea5' "
       "title 'h0 hash'\n";
  g << "set output '" << pngs[3] << "'\nset style data histograms\nset title 'Local density per rank (mean over "
    << s.iterations << " iterations)'\nset xlabel 'rank'\nset ylabel 'density (%)'\nset key off\n"
    << "plot 'density.dat' using ($2*100):xtic(1) lc rgb '#3b6ea5'\n";
  write_text(out / "plots.gp", g.str());
  const std::string cmd = "cd " + quote(fs::absolute(out).string()) + " && " + quote(gp) + " plots.gp 2>gnuplot.log";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::cerr << "zen_trace stats: warning: gnuplot failed (exit " << rc << "), see " << (out / "gnuplot.log").string()
              << "; PNG plots skipped\n";
    return {};
  }
  std::vector<std::string> written;
  for (const auto& p : pngs)
    if (fs::exists(out / p)) written.push_back((out / p).string());
  return written;
}

}  // namespace zen::trace
