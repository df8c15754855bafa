// `zen_orbit plot`: the visibility timeline and the ground tracks of a scenario as PNG (data files
// and a gnuplot script, then gnuplot).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "scenario_args.hpp"
#include "zen/error.hpp"
#include "zen/orbit/time.hpp"
#include "zen/orbit/visibility.hpp"

namespace zen_orbit_cli {

namespace {

std::string quote(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

int cmd_plot(const ScenarioArgs& a, const std::string& out_dir, int max_tracks, double track_step) {
  namespace fs = std::filesystem;
  const zo::Scenario sc = load(a);
  const zo::PredictOptions opt = predict_options(a);
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  fs::create_directories(out_dir);
  const fs::path dir(out_dir);
  const int n = sc.num_satellites();
  {
    std::ofstream f(dir / "timeline.dat");
    f << "# start_h sat duration_h peer\n";
    for (int k = 0; k < n; ++k)
      for (const auto& w : plan.windows(k))
        f << w.start_s / 3600.0 << ' ' << k << ' ' << w.duration_s() / 3600.0 << ' ' << w.peer << '\n';
  }
  const zo::Geometry geo(sc);
  std::vector<int> tracked;
  if (n <= max_tracks) {
    for (int k = 0; k < n; ++k) tracked.push_back(k);
  } else {
    for (int p = 0; p < sc.planes && static_cast<int>(tracked.size()) < max_tracks; ++p) {
      const auto m = sc.plane_members(p);
      if (!m.empty()) tracked.push_back(m[0]);
    }
  }
  {
    std::ofstream f(dir / "groundtrack.dat");
    f << "# lon_deg lat_deg (one block per satellite)\n";
    for (int k : tracked) {
      double prev_lon = 1e9;
      for (double t = 0.0; t <= opt.horizon_s; t += track_step) {
        const zo::LatLon ll = zo::subpoint(geo.sat_position(k, t), zo::gmst(t, sc.gmst0_rad));
        if (std::abs(ll.lon_deg - prev_lon) > 180.0) f << '\n';
        f << ll.lon_deg << ' ' << ll.lat_deg << '\n';
        prev_lon = ll.lon_deg;
      }
      f << "\n\n";
    }
    std::ofstream g(dir / "stations.dat");
    for (const auto& s : sc.servers)
      if (s.kind == zo::ServerNode::Kind::Ground) g << s.station.lon_deg << ' ' << s.station.lat_deg << ' ' << s.name << '\n';
  }
  const bool has_gs = std::any_of(sc.servers.begin(), sc.servers.end(),
                                  [](const auto& s) { return s.kind == zo::ServerNode::Kind::Ground; });
  const fs::path script = dir / "plot.gp";
  {
    std::ofstream f(script);
    const int height = std::clamp(200 + 12 * n, 400, 4000);
    f << "set terminal pngcairo size 1400," << height << "\n"
      << "set output " << quote(dir / "timeline.png") << "\n"
      << "set title 'Visibility of the server: " << sc.name << " (" << zo::propagator_name(sc.propagator)
      << ", one row per satellite)'\n"
      << "set xlabel 'time since epoch [h]'\nset ylabel 'satellite id'\n"
      << "set xrange [0:" << opt.horizon_s / 3600.0 << "]\nset yrange [-1:" << n << "]\nset grid x\n"
      << "plot " << quote(dir / "timeline.dat")
      << " using 1:2:3:(0) with vectors nohead lw 3 lc rgb '#1f77b4' notitle\n"
      << "set terminal pngcairo size 1400,800\n"
      << "set output " << quote(dir / "groundtrack.png") << "\n"
      << "set title 'Ground tracks: " << sc.name << " (" << tracked.size() << " satellites, "
      << opt.horizon_s / 3600.0 << " h)'\n"
      << "set xlabel 'longitude [deg]'\nset ylabel 'latitude [deg]'\n"
      << "set xrange [-180:180]\nset yrange [-90:90]\nset grid\nunset key\n"
      << "plot " << quote(dir / "groundtrack.dat") << " using 1:2 with lines lw 1 lc rgb '#1f77b4'";
    if (has_gs)
      f << ", " << quote(dir / "stations.dat") << " using 1:2 with points pt 7 ps 2 lc rgb 'red', "
        << quote(dir / "stations.dat") << " using 1:2:3 with labels offset 2,1";
    f << "\n";
  }
  const std::string cmd = "gnuplot " + quote(script);
  const int rc = std::system(cmd.c_str());
  ZEN_CHECK_CODE(rc == 0, zen::Result::SystemError, "'" + cmd + "' failed with status " + std::to_string(rc));
  std::printf("wrote %s and %s\n", (dir / "timeline.png").c_str(), (dir / "groundtrack.png").c_str());
  return 0;
}

struct PlotArgs {
  ScenarioArgs scenario;
  std::string dir = "orbit_plots";
  int max_tracks = 64;
  double track_step = 60.0;
};

}  // namespace

Command add_plot_command(CLI::App& app) {
  auto pa = std::make_shared<PlotArgs>();
  auto* plot = app.add_subcommand("plot", "PNG visibility timeline and ground tracks (gnuplot)");
  add_scenario_options(plot, pa->scenario, true);
  plot->add_option("--out", pa->dir, "output directory")->capture_default_str();
  plot->add_option("--max-tracks", pa->max_tracks, "ground tracks drawn (else slot 0 of each plane)")->capture_default_str();
  plot->add_option("--track-step", pa->track_step, "ground-track sample step [s]")->capture_default_str();
  return {plot, [pa] { return cmd_plot(pa->scenario, pa->dir, pa->max_tracks, pa->track_step); }};
}

}  // namespace zen_orbit_cli
