// `zen_orbit sweep`'s report (sweep_report.hpp): the summary table and the heatmap / speed-up plots
// (gnuplot) of the rows of a sweep.
#include "sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "zen/error.hpp"

namespace zen_orbit_cli {

namespace fs = std::filesystem;

namespace {

std::string others_key(const zs::SweepPoint& p) {  // the axes besides planes, S, stations, scheme
  std::ostringstream os;
  os << "h=" << p.altitude_km << " i=" << p.inclination_deg << " " << p.pattern << " F=" << p.phasing_axis
     << " preset=" << p.preset << " compute=" << p.compute << " split=" << p.split;
  return os.str();
}

}  // namespace

void print_summary(const std::vector<const zs::SweepRow*>& rows, const zs::SweepGrid& grid, double target) {
  const std::vector<std::string>& schemes = grid.scheme;
  // (scheme, stations) in grid order
  std::map<std::pair<std::size_t, std::size_t>, std::vector<const zs::SweepRow*>> by_pos;
  auto pos = [](const std::vector<std::string>& v, const std::string& x) {
    return static_cast<std::size_t>(std::find(v.begin(), v.end(), x) - v.begin());
  };
  for (const auto* r : rows) by_pos[{pos(grid.scheme, r->point.scheme), pos(grid.stations, r->point.stations)}].push_back(r);
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<const zs::SweepRow*>>> by;
  for (auto& [k, v] : by_pos) by.push_back({{v.front()->point.scheme, v.front()->point.stations}, std::move(v)});
  std::printf("\n| scheme | stations | points | errors | reached %.2f | median time to target [h] | fastest [h] | "
              "slowest [h] | median final acc | median idle fraction | mean staleness |\n",
              target);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [k, v] : by) {
    std::vector<double> tt, acc, idle;
    double stale = 0;
    int errors = 0;
    for (const auto* r : v) {
      if (r->status != "ok") {
        ++errors;
        continue;
      }
      if (r->time_to_target_s >= 0) tt.push_back(r->time_to_target_s / 3600.0);
      acc.push_back(r->final_accuracy);
      idle.push_back(r->idle_fraction);
      stale += r->staleness_mean;
    }
    auto median = [](std::vector<double> x) {
      if (x.empty()) return std::nan("");
      std::sort(x.begin(), x.end());
      return x.size() % 2 ? x[x.size() / 2] : 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
    };
    const std::size_t ok = v.size() - static_cast<std::size_t>(errors);
    std::printf("| %s | %s | %zu | %d | %zu | %.2f | %.2f | %.2f | %.4f | %.3f | %.3f |\n", k.first.c_str(),
                k.second.c_str(), v.size(), errors, tt.size(), median(tt),
                tt.empty() ? std::nan("") : *std::min_element(tt.begin(), tt.end()),
                tt.empty() ? std::nan("") : *std::max_element(tt.begin(), tt.end()), median(acc), median(idle),
                ok ? stale / ok : 0.0);
  }
  // Each scheme against the first at the same point otherwise: time-to-target ratios.
  if (schemes.size() < 2) return;
  std::map<std::string, const zs::SweepRow*> first;
  auto strip = [](const zs::SweepPoint& p) { return p.key().substr(0, p.key().rfind(";scheme=")); };
  for (const auto* r : rows)
    if (r->point.scheme == schemes[0] && r->status == "ok" && r->time_to_target_s > 0) first[strip(r->point)] = r;
  for (std::size_t i = 1; i < schemes.size(); ++i) {
    std::vector<double> ratio;
    for (const auto* r : rows) {
      if (r->point.scheme != schemes[i] || r->status != "ok" || r->time_to_target_s <= 0) continue;
      const auto it = first.find(strip(r->point));
      if (it != first.end()) ratio.push_back(it->second->time_to_target_s / r->time_to_target_s);
    }
    if (ratio.empty()) continue;
    std::sort(ratio.begin(), ratio.end());
    std::printf("%s vs %s, time to %.2f over %zu points reached by both: median %.2fx, min %.2fx, max %.2fx\n",
                schemes[i].c_str(), schemes[0].c_str(), target, ratio.size(), ratio[ratio.size() / 2], ratio.front(),
                ratio.back());
  }
}

/// heatmap[-N].png: time to target [h] over planes x satellites per plane, one panel per (stations,
/// scheme); speedup[-N].png: speed-up over the smallest constellation of the same settings against
/// the number of satellites. One pair per combination of the other axes (plots.txt lists them).
void write_plots(const std::string& out, const std::vector<const zs::SweepRow*>& rows, const zs::SweepGrid& g,
                 const std::map<std::string, zs::SweepPoint>& grid_points, double target) {
  std::map<std::string, std::vector<const zs::SweepRow*>> groups;
  double lo = 1e300, hi = -1e300;
  for (const auto* r : rows) {
    groups[others_key(grid_points.at(r->point.key()))].push_back(r);
    if (r->status == "ok" && r->time_to_target_s >= 0) {
      const double v = std::log10(std::max(r->time_to_target_s, 1.0) / 3600.0);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (lo > hi) lo = 0, hi = 1;  // nothing reached the target: empty panels
  if (hi - lo < 1e-9) hi = lo + 1;
  std::vector<int> P = g.planes, S = g.sats_per_plane;
  std::sort(P.begin(), P.end());
  P.erase(std::unique(P.begin(), P.end()), P.end());
  std::sort(S.begin(), S.end());
  S.erase(std::unique(S.begin(), S.end()), S.end());
  std::ofstream index(fs::path(out) / "plots.txt");
  int gi = 0;
  for (const auto& [other, grs] : groups) {
    const std::string suffix = groups.size() == 1 ? "" : "-" + std::to_string(gi);
    ++gi;
    index << "heatmap" << suffix << ".png speedup" << suffix << ".png: " << other << "\n";
    const fs::path dat = fs::path(out) / ("plot" + suffix + ".dat");
    std::ofstream f(dat);
    // Panels: stations x scheme in grid order.
    std::vector<std::pair<std::string, std::string>> panels;
    for (const auto& st : g.stations)
      for (const auto& sc : g.scheme) panels.push_back({st, sc});
    for (std::size_t pi = 0; pi < panels.size(); ++pi) {
      f << "# panel " << pi << " stations " << panels[pi].first << " scheme " << panels[pi].second << "\n";
      for (std::size_t j = 0; j < S.size(); ++j) {
        for (std::size_t i = 0; i < P.size(); ++i) {
          double v = std::nan("");
          for (const auto* r : grs)
            if (r->point.planes == P[i] && r->point.sats_per_plane == S[j] && r->point.stations == panels[pi].first &&
                r->point.scheme == panels[pi].second && r->status == "ok" && r->time_to_target_s >= 0)
              v = std::log10(std::max(r->time_to_target_s, 1.0) / 3600.0);
          f << i << ' ' << j << ' ' << v << '\n';
        }
        f << '\n';
      }
      f << "\n";
    }
    // Speed-up over the smallest constellation with the same stations and scheme.
    const fs::path sdat = fs::path(out) / ("speedup" + suffix + ".dat");
    std::ofstream sf(sdat);
    for (std::size_t pi = 0; pi < panels.size(); ++pi) {
      const zs::SweepRow* base = nullptr;
      for (const auto* r : grs)
        if (r->point.stations == panels[pi].first && r->point.scheme == panels[pi].second && r->status == "ok" &&
            r->time_to_target_s > 0 && (!base || r->point.satellites() < base->point.satellites()))
          base = r;
      sf << "# series " << pi << " stations " << panels[pi].first << " scheme " << panels[pi].second << "\n";
      if (base)
        for (const auto* r : grs)
          if (r->point.stations == panels[pi].first && r->point.scheme == panels[pi].second && r->status == "ok" &&
              r->time_to_target_s > 0)
            sf << r->point.satellites() << ' ' << base->time_to_target_s / r->time_to_target_s << '\n';
      sf << "\n\n";
    }
    const fs::path gp = fs::path(out) / ("plots" + suffix + ".gp");
    std::ofstream s(gp);
    const std::size_t rowsn = g.stations.size(), cols = g.scheme.size();
    s << "set terminal pngcairo size " << std::max<std::size_t>(500, 360 * cols) << ","
      << std::max<std::size_t>(420, 320 * rowsn) << "\n"
      << "set output '" << (fs::path(out) / ("heatmap" + suffix + ".png")).string() << "'\n"
      << "set multiplot layout " << rowsn << "," << cols << " title 'log10 time to " << target
      << " accuracy [h] (" << other << ")'\n"
      << "set xtics (";
    for (std::size_t i = 0; i < P.size(); ++i) s << (i ? "," : "") << "'" << P[i] << "' " << i;
    s << ")\nset ytics (";
    for (std::size_t j = 0; j < S.size(); ++j) s << (j ? "," : "") << "'" << S[j] << "' " << j;
    s << ")\nset xlabel 'planes'\nset ylabel 'sats / plane'\nset palette rgb 33,13,10\nset datafile missing 'nan'\n"
      << "set xrange [-0.5:" << P.size() - 0.5 << "]\nset yrange [-0.5:" << S.size() - 0.5 << "]\n"
      << "set cbrange [" << lo << ":" << hi << "]\nunset key\n";
    for (std::size_t pi = 0; pi < panels.size(); ++pi)
      s << "set title '" << panels[pi].second << ", "
        << (panels[pi].first == "meo" ? std::string("MEO server") : panels[pi].first + " station(s)") << "'\n"
        << "plot '" << dat.string() << "' index " << pi
        << " using 1:2:($1-0.5):($1+0.5):($2-0.5):($2+0.5):3 with boxxy fc palette fs solid\n";
    s << "unset multiplot\nreset\n"
      << "set terminal pngcairo size 1000,650\nset output '" << (fs::path(out) / ("speedup" + suffix + ".png")).string()
      << "'\nset title \"time to " << target << ": speed-up over the smallest constellation\\n(" << other
      << ")\"\nset xlabel 'satellites'\nset ylabel 'speed-up'\nset logscale xy\nset xtics auto\nset ytics auto\n"
      << "set key outside right\nset grid\nplot ";
    for (std::size_t pi = 0; pi < panels.size(); ++pi)
      s << (pi ? ", " : "") << "'" << sdat.string() << "' index " << pi << " using 1:2 with points pt " << (5 + pi % 8)
        << " title '" << panels[pi].second << ", " << panels[pi].first << (panels[pi].first == "meo" ? "'" : " gs'");
    s << "\n";
    s.close();
    f.close();  // the data files must be complete before gnuplot reads them
    sf.close();
    ZEN_CHECK_CODE(s.good() && f.good() && sf.good(), zen::Result::SystemError, "cannot write the plot files in '" + out + "'");
    const std::string cmd = "gnuplot '" + gp.string() + "'";
    const int rc = std::system(cmd.c_str());
    ZEN_CHECK_CODE(rc == 0, zen::Result::SystemError, "'" + cmd + "' failed with status " + std::to_string(rc));
  }
}

}  // namespace zen_orbit_cli
