// zen_orbit: contact windows, link budgets and plots for orbit-aware FL scenarios.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "common/progress.hpp"
#include "sweep.hpp"
#include "zen/error.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif
#include "zen/fl/sim/experiment.hpp"
#include "zen/fl/sim/paper.hpp"
#include "zen/fl/sim/wire.hpp"
#include "zen/fl/sim/loopback_runner.hpp"
#include "zen/orbit/contact.hpp"
#include "zen/orbit/link.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/orbit/sgp4.hpp"
#include "zen/orbit/time.hpp"
#include "zen/orbit/tle.hpp"
#include "zen/orbit/visibility.hpp"

namespace zo = zen::orbit;

namespace {

struct ScenarioArgs {
  std::string name = "reference";
  std::string config;
  std::string propagator;  // empty: the scenario's own (two-body for the built-ins)
  double days = 1.0;
  unsigned threads = 0;
  std::vector<std::string> servers;  // --server (repeatable): replace the scenario's servers
  std::vector<std::string> stations;  // --station (repeatable): ground stations, with the servers
  std::string tle;                   // --tle: SGP4 scenario from a TLE / OMM file
  std::string start;                 // --start: UTC of t = 0 (with --tle)
  double mask_deg = -1.0;            // --mask: elevation mask (< 0: the scenario's)
};

void add_scenario_options(CLI::App* app, ScenarioArgs& a, bool with_days) {
  app->add_option("--scenario", a.name, "built-in scenario: reference, reference-star, bremen, northpole, starlink")
      ->capture_default_str();
  app->add_option("--config", a.config, "scenario JSON file (overrides --scenario; format in docs/orbit.md)");
  app->add_option("--propagator", a.propagator, "two-body (default), j2, or sgp4 (needs --tle or a JSON with \"tle\")")
      ->check(CLI::IsMember({"two-body", "j2", "sgp4"}));
  app->add_option("--tle", a.tle,
                  "SGP4 constellation from a TLE / OMM (JSON or CSV) file: satellite k = the k-th element set, planes "
                  "grouped automatically (docs/orbit.md)");
  app->add_option("--start", a.start, "with --tle: UTC of t = 0, e.g. 2022-06-17T00:00:00Z (default: the earliest epoch)");
  app->add_option("--station", a.stations,
                  "ground station server (repeatable) [NAME=]LAT,LON[,ALT_M] (deg, m; WGS-84 geodetic with --tle); "
                  "added to the --server list");
  app->add_option("--mask", a.mask_deg, "ground-station elevation mask [deg] (default: the scenario's, 10)");
  app->add_option("--threads", a.threads, "worker threads for window prediction (0 = all cores)");
  app->add_option("--server", a.servers,
                  "replace the servers (repeatable): meo, bremen, northpole or a ground station [NAME=]LAT,LON[,ALT_M]");
  if (with_days) app->add_option("--days", a.days, "prediction horizon in days")->capture_default_str();
}

std::vector<zo::ServerNode> parse_servers(const std::vector<std::string>& servers,
                                          const std::vector<std::string>& stations) {
  std::vector<zo::ServerNode> out;
  for (const auto& s : servers) out.push_back(zo::parse_server(s));
  for (const auto& s : stations) {
    out.push_back(zo::parse_server(s));
    ZEN_ENFORCE(out.back().kind == zo::ServerNode::Kind::Ground,
                "--station '" + s + "' is not a ground station ([NAME=]LAT,LON[,ALT_M]); use --server for satellites");
  }
  return out;
}

zo::Scenario load(const ScenarioArgs& a) {
  const std::vector<zo::ServerNode> servers = parse_servers(a.servers, a.stations);
  zo::Scenario sc;
  if (!a.tle.empty()) {
    ZEN_ENFORCE(a.config.empty(), "--tle and --config: give one (a JSON config names its TLE file with \"tle\")");
    ZEN_ENFORCE(a.propagator.empty() || a.propagator == "sgp4",
                "--tle needs --propagator sgp4 (or none), got '" + a.propagator + "'");
    sc = zo::Scenario::from_elements_file(a.tle, a.start, servers);
  } else {
    ZEN_ENFORCE(a.start.empty(), "--start needs --tle");
    sc = a.config.empty() ? zo::Scenario::named(a.name) : zo::Scenario::from_file(a.config);
    if (!a.propagator.empty()) sc.propagator = zo::parse_propagator(a.propagator);
    if (!servers.empty()) sc.servers = servers;
  }
  if (a.mask_deg >= 0.0) sc.elevation_mask_deg = a.mask_deg;
  sc.validate();
  for (const auto& w : zo::ring_warnings(sc)) std::cerr << "warning: " << w << "\n";
  return sc;
}

zo::PredictOptions predict_options(const ScenarioArgs& a) {
  ZEN_ENFORCE(a.days > 0.0, "--days must be positive, got " + std::to_string(a.days));
  zo::PredictOptions o;
  o.horizon_s = a.days * 86400.0;
  o.threads = a.threads;
  return o;
}

struct PlanSummary {
  double mean_fraction = 0, min_fraction = 1, max_fraction = 0;
  double mean_windows = 0;
  std::size_t min_windows = 0, max_windows = 0;
};

PlanSummary summarize(const zo::ContactPlan& plan) {
  PlanSummary s;
  const int n = plan.num_satellites();
  s.min_windows = static_cast<std::size_t>(-1);
  for (int k = 0; k < n; ++k) {
    const double f = plan.visible_fraction(k);
    const std::size_t w = plan.windows(k).size();
    s.mean_fraction += f / n;
    s.min_fraction = std::min(s.min_fraction, f);
    s.max_fraction = std::max(s.max_fraction, f);
    s.mean_windows += static_cast<double>(w) / n;
    s.min_windows = std::min(s.min_windows, w);
    s.max_windows = std::max(s.max_windows, w);
  }
  return s;
}

int cmd_windows(const ScenarioArgs& a, const std::string& out) {
  const zo::Scenario sc = load(a);
  const zo::PredictOptions opt = predict_options(a);
  const auto t0 = std::chrono::steady_clock::now();
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (out.empty() || out == "-") {
    plan.write_csv(std::cout, sc);
  } else {
    std::ofstream f(out);
    ZEN_CHECK_CODE(f.good(), zen::Result::SystemError, "cannot write '" + out + "'");
    plan.write_csv(f, sc);
    ZEN_CHECK_CODE(f.good(), zen::Result::SystemError, "write to '" + out + "' failed");
  }
  const PlanSummary s = summarize(plan);
  std::fprintf(stderr,
               "scenario %s (%s): %d satellites, %zu server endpoint(s), %.3f days\n"
               "windows: %zu total, per satellite mean %.3f (min %zu, max %zu)\n"
               "visible fraction: mean %.4f (min %.4f, max %.4f)\n"
               "prediction time: %.3f s\n%s",
               sc.name.c_str(), zo::propagator_name(sc.propagator), sc.num_satellites(), sc.servers.size(), a.days,
               plan.total_windows(), s.mean_windows, s.min_windows, s.max_windows, s.mean_fraction, s.min_fraction,
               s.max_fraction, secs,
               sc.propagator == zo::Propagator::Sgp4 ? ("t = 0 is " + sc.epoch_utc + " (UTC)\n").c_str() : "");
  return 0;
}

int cmd_links(const ScenarioArgs& a, double bits) {
  const zo::Scenario sc = load(a);
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, predict_options(a));
  const double mask = sc.elevation_mask_deg * zo::kDegToRad;
  const double R = zo::kEarthRadius + sc.atmosphere_margin_m;
  std::printf("scenario %s: model %.0f bit, horizon %.3f days\n", sc.name.c_str(), bits, a.days);
  // Every plane's ring.
  std::printf("\nIntra-orbit ISL rings\n");
  std::vector<std::pair<std::string, double>> links;
  for (const zo::RingInfo& r : zo::ring_infos(sc)) {
    const double alt = sc.satellites[static_cast<std::size_t>(sc.plane_members(r.plane)[0])].orbit.altitude_m;
    std::printf("  plane %d: S=%d, h=%.1f km, neighbour distance %.1f km, chord clearance %.1f km, %s\n", r.plane,
                r.sats, alt / 1e3, r.neighbour_distance_m / 1e3, r.chord_clearance_m / 1e3,
                r.feasible ? "feasible" : "BLOCKED");
    if (r.sats > 1) links.push_back({"ISL plane " + std::to_string(r.plane), r.neighbour_distance_m});
  }
  std::printf("\nServer links (worst case = largest distance over all predicted windows)\n");
  const zo::Geometry geo(sc);
  for (int p = 0; p < static_cast<int>(sc.servers.size()); ++p) {
    const auto& srv = sc.servers[static_cast<std::size_t>(p)];
    double bound = 0.0, worst = 0.0;
    for (int k = 0; k < sc.num_satellites(); ++k) {
      double r_sat = geo.trajectory(k).radius();
      if (const zo::Sgp4* m = geo.sgp4(k)) {  // SGP4: the mean apoapsis radius, not the circle at the start
        const double n = m->elements().mean_motion_rev_per_day * zo::kTwoPi / 86400.0;
        r_sat = std::cbrt(zo::kEarthMu / (n * n)) * (1.0 + m->elements().eccentricity);
      }
      if (srv.kind == zo::ServerNode::Kind::Ground) {
        bound = std::max(bound, zo::max_slant_range(r_sat, zo::kEarthRadius + srv.station.alt_m, mask));
      } else {
        bound = std::max(bound, zo::tangent_distance(r_sat, srv.orbit.radius_m(), R));
      }
      for (const auto& w : plan.windows(k))
        if (w.peer == p) worst = std::max(worst, w.max_dist_m);
    }
    std::printf("  peer %d '%s' (%s): geometric bound %.1f km, worst observed %.1f km\n", p, srv.name.c_str(),
                srv.kind == zo::ServerNode::Kind::Ground ? "ground" : "satellite", bound / 1e3, worst / 1e3);
    for (const std::string& name : zo::LinkPreset::names()) {
      // Rate integrated over each closed window as the geometry changes vs its worst-case rate.
      const zo::LinkPreset lp = zo::LinkPreset::named(name);
      double sum_mean = 0.0, sum_worst = 0.0;
      int count = 0;
      for (int k = 0; k < sc.num_satellites(); ++k)
        for (const auto& w : plan.windows(k))
          if (w.peer == p && !w.open_at_start && !w.open_at_end) {
            sum_mean += zo::window_mean_rate_bps(lp, geo, w, 10.0);
            sum_worst += zo::window_rate_bps(lp, w);
            ++count;
          }
      if (count > 0)
        std::printf("    %s: over %d closed windows, mean integrated rate %.6f Mb/s vs mean worst-case rate %.6f Mb/s\n",
                    name.c_str(), count, sum_mean / count / 1e6, sum_worst / count / 1e6);
    }
    links.push_back({"server " + srv.name + " bound", bound});
    if (worst > 0.0) links.push_back({"server " + srv.name + " worst", worst});
  }
  std::vector<std::pair<std::string, zo::LinkPreset>> budgets;
  for (const std::string& name : zo::LinkPreset::names()) budgets.push_back({"Preset " + name, zo::LinkPreset::named(name)});
  if (sc.isl_link) budgets.push_back({"Scenario link isl", *sc.isl_link});
  if (sc.server_link) budgets.push_back({"Scenario link server", *sc.server_link});
  for (const auto& [title, lp] : budgets) {
    std::printf("\n%s: f=%.3g GHz, B=%.3g MHz, P=%.3g W, G=%.4g/%.4g (%.2f/%.2f dBi), T=%.1f K, losses %.2f dB, rate %s",
                title.c_str(), lp.frequency_hz / 1e9, lp.bandwidth_hz / 1e6, lp.tx_power_w, lp.gain_tx, lp.gain_rx,
                zo::to_db(lp.gain_tx), zo::to_db(lp.gain_rx), lp.noise_temp_k, lp.losses_db,
                zo::rate_model_name(lp.rate_model));
    if (lp.min_snr_db > -1e299) std::printf(", min SNR %.2f dB", lp.min_snr_db);
    std::printf("\n  %-28s %12s %10s %14s %12s %s\n", "link", "dist_km", "snr_db", "rate_Mbps", "time_s",
                lp.rate_model == zo::RateModel::DvbS2 ? "modcod" : "");
    for (const auto& [label, d] : links) {
      const zo::Modcod* m = lp.rate_model == zo::RateModel::DvbS2 ? zo::dvbs2_modcod(lp, d) : nullptr;
      std::printf("  %-28s %12.1f %10.2f %14.6f %12.6f %s\n", label.c_str(), d / 1e3, zo::to_db(zo::snr(lp, d)),
                  zo::rate_bps(lp, d) / 1e6, zo::transfer_time_s(lp, bits, d),
                  lp.rate_model != zo::RateModel::DvbS2 ? "" : (m ? m->name : "none"));
    }
  }
  return 0;
}

struct PropagateArgs {
  std::string tle, start, out;
  double minutes = 0.0, step = 60.0;
};

// TEME states of every element set of a file at start + k * step, k = 0 .. floor(minutes * 60 / step).
int cmd_propagate(const PropagateArgs& p) {
  ZEN_ENFORCE(std::isfinite(p.minutes) && p.minutes >= 0.0, "--minutes must be >= 0, got " + std::to_string(p.minutes));
  ZEN_ENFORCE(std::isfinite(p.step) && p.step > 0.0, "--step must be positive, got " + std::to_string(p.step));
  const std::vector<zo::MeanElements> els = zo::read_elements(p.tle);
  const auto [jd0, fr0] = zo::elements_start(els, p.start);
  const double nsteps = std::floor(p.minutes * 60.0 / p.step + 1e-9);
  ZEN_ENFORCE(nsteps < 1e8, "--minutes / --step gives " + std::to_string(nsteps) + " steps (too many)");
  const long steps = static_cast<long>(nsteps);
  std::ofstream file;
  if (!p.out.empty() && p.out != "-") {
    file.open(p.out);
    ZEN_CHECK_CODE(file.good(), zen::Result::SystemError, "cannot write '" + p.out + "'");
  }
  std::ostream& os = file.is_open() ? static_cast<std::ostream&>(file) : std::cout;
  os << "sat,name,catalog,t_s,utc,x_km,y_km,z_km,vx_km_s,vy_km_s,vz_km_s\n";
  char buf[400];
  for (std::size_t k = 0; k < els.size(); ++k) {
    const zo::Sgp4 model(els[k]);
    std::string name = els[k].name;
    std::replace(name.begin(), name.end(), ',', ' ');
    for (long i = 0; i <= steps; ++i) {
      const double t = static_cast<double>(i) * p.step;
      const zo::SatState st = zo::sgp4_state(model, static_cast<int>(k), jd0, fr0, t);
      std::snprintf(buf, sizeof buf, "%zu,%s,%d,%.3f,%s,%.9f,%.9f,%.9f,%.12f,%.12f,%.12f\n", k, name.c_str(),
                    els[k].catalog_number, t, zo::format_utc(jd0, fr0 + t / 86400.0).c_str(), st.r_m.x() / 1e3,
                    st.r_m.y() / 1e3, st.r_m.z() / 1e3, st.v_m_s.x() / 1e3, st.v_m_s.y() / 1e3, st.v_m_s.z() / 1e3);
      os << buf;
    }
  }
  os.flush();
  ZEN_CHECK_CODE(os.good(), zen::Result::SystemError, "write to '" + (p.out.empty() ? std::string("stdout") : p.out) + "' failed");
  std::fprintf(stderr, "%zu satellites, %ld steps of %.3f s from %s (TEME, SGP4 WGS-72)\n", els.size(), steps + 1,
               p.step, zo::format_utc(jd0, fr0).c_str());
  return 0;
}

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


// ---- fl / compare: orbit-aware federated learning (zen::fl::sim, docs/fl-orbit.md) ----
namespace zs = zen::fl::sim;

struct FlArgs {
  zs::ExperimentConfig cfg;
  std::string schemes;
  std::string presets;
  std::string out;
  std::vector<std::string> faults;
  bool transfers = false;
  std::string backend = "loopback";
  int ranks = 0;     // loopback ranks
  std::vector<double> sweep_gflops;  // compare: timing-only sweep of the on-board throughput
  std::vector<double> topk{1.0};     // compare: top-k fractions of the compressed updates
  std::vector<double> topk_down{1.0};  // compare: top-k fractions of the compressed downloads (zipped with topk)
  bool root = true;  // this process prints (rank 0 under --backend mpi)
};

// --backend mpi: the learner runs with one MPI process per communicator rank (server on rank 0,
// satellites multiplexed over the others); every process simulates the same schedule and only
// rank 0 prints and writes files. Run it under mpirun.
struct BackendScope {
#ifdef ZEN_HAVE_MPI
  std::unique_ptr<zen::mpi::Environment> env;
  std::unique_ptr<zen::Communicator> comm;
#endif
  explicit BackendScope(FlArgs& a) {
    if (a.backend != "mpi") {
      // Several copies of a loopback run would each simulate everything and write the same files.
      for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
        if (const char* e = std::getenv(v); e && std::atoi(e) > 1)
          ZEN_THROW(zen::Result::InvalidUsage, std::string("started as ") + e + " MPI processes (" + v +
                                                   ") with --backend " + a.backend +
                                                   ", which runs everything in one process: add --backend mpi, or run "
                                                   "without mpirun");
      a.cfg.learn = zs::loopback_runner(a.ranks);
      return;
    }
#ifdef ZEN_HAVE_MPI
    env = std::make_unique<zen::mpi::Environment>(nullptr, nullptr);
    comm = zen::mpi::create(MPI_COMM_WORLD);
    comm->set_timeout(std::chrono::milliseconds(600000));
    a.cfg.learn = zs::on_communicator(*comm);
    if (comm->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) std::perror("freopen");
    if (comm->rank() != 0) a.out.clear();
    a.root = comm->rank() == 0;
#else
    ZEN_THROW(zen::Result::Unsupported, "--backend mpi: zen_orbit was built without MPI (ZEN_WITH_MPI=OFF)");
#endif
  }
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

void add_fl_options(CLI::App* app, FlArgs& a) {
  auto& c = a.cfg;
  app->add_option("--scenario", c.scenario, "built-in scenario")->capture_default_str();
  app->add_option("--config", c.scenario_file, "scenario JSON file (overrides --scenario)");
  app->add_option("--tle", c.tle_file, "SGP4 constellation from a TLE / OMM file (overrides --scenario; planes grouped "
                                      "automatically; server: the MEO one unless --server / --station)");
  app->add_option("--start", c.start_utc, "with --tle: UTC of t = 0 (default: the earliest epoch)");
  app->add_option("--station", c.servers, "ground station server (repeatable) [NAME=]LAT,LON[,ALT_M], like --server");
  app->add_option("--server", c.servers,
                  "replace the servers (repeatable): meo, bremen (53.0N 8.8E), northpole or a ground station "
                  "[NAME=]LAT,LON[,ALT_M]");
  app->add_option("--rounds", c.rounds, "sync rounds / async iterations per orbit (default 20, or --max-rounds with --target-acc)");
  app->add_option("--target-acc", c.target_acc, "target test accuracy (time to reach it is reported)");
  app->add_option("--max-rounds", c.max_rounds, "rounds simulated with --target-acc and no --rounds")->capture_default_str();
  app->add_option("--model", c.model, "logreg or mlp")->check(CLI::IsMember({"logreg", "mlp"}))->capture_default_str();
  app->add_option("--hidden", c.hidden, "mlp hidden units")->capture_default_str();
  app->add_option("--split", c.split,
                  "iid | dirichlet:ALPHA (label skew, equal sizes) | dirichlet-class:ALPHA (per-class shares, unequal "
                  "sizes) | lognormal:SIGMA (IID, unequal sizes) | orbit:C (each orbital plane sees C classes)")
      ->capture_default_str();
  app->add_option("--weighting", c.weighting, "samples or uniform")->capture_default_str();
  app->add_option("--lr", c.lr, "SGD learning rate")->capture_default_str();
  app->add_option("--batch", c.batch, "SGD batch size")->capture_default_str();
  app->add_option("--epochs", c.epochs, "local epochs per round")->capture_default_str();
  app->add_option("--seed", c.seed, "master seed")->capture_default_str();
  app->add_option("--data-dir", c.data_dir, "Fashion-MNIST IDX directory (default $ZEN_FMNIST_DIR or the Debian path)");
  app->add_option("--train-limit", c.train_limit, "use only the first N training images");
  app->add_option("--test-limit", c.test_limit, "use only the first N test images");
  app->add_option("--train-time", c.train_time,
                  "on-board training time per round: seconds, 'measured', or 'work' (samples x epochs x 6 x params "
                  "FLOP over --onboard-gflops)")
      ->capture_default_str();
  app->add_option("--onboard-gflops", c.onboard_gflops, "work: sustained on-board training throughput [GFLOP/s]")
      ->capture_default_str();
  app->add_option("--compute-spread", c.compute_spread,
                  "work: per-satellite throughput uniform in [1 - S, 1 + S] x the nominal (seeded)")
      ->capture_default_str();
  app->add_option("--train-scale", c.train_scale, "measured training: simulated s = measured wall s * factor")
      ->capture_default_str();
  app->add_option("--fault", a.faults, "sat:ID@T | link:A-B@T | miss:ID@T (repeatable)");
  app->add_option("--staleness", c.staleness_exponent, "ring-async / fedasync staleness exponent a, s = (1+tau)^-a")
      ->capture_default_str();
  app->add_option("--mixing", c.fedasync_mixing, "fedasync: w <- (1 - a_t) w + a_t w_k with a_t = MIXING s(tau)")
      ->capture_default_str();
  app->add_option("--deadline", c.round_deadline_s,
                  "baseline-deadline: uploads must complete within this many seconds of the round start")
      ->capture_default_str();
  app->add_option("--days", c.initial_days, "initial contact-plan horizon (doubled as needed)")->capture_default_str();
  app->add_option("--clients-per-round", c.clients_per_round,
                  "schemes without ISLs: the first C idle satellites in contact train per synchronous round (fedbuff: at "
                  "most C at once); 0 = all")
      ->capture_default_str();
  app->add_option("--prox-mu", c.prox_mu, "fedprox: proximal term mu")->capture_default_str();
  app->add_option("--prox-max-epochs", c.prox_max_epochs, "fedprox: most local epochs before the next contact")
      ->capture_default_str();
  app->add_option("--buffer", c.buffer_size, "fedbuff: client deltas per server update")->capture_default_str();
  app->add_option("--server-lr", c.server_lr, "fedbuff: server step on the buffered mean")->capture_default_str();
  app->add_option("--samples-per-sat", c.samples_per_satellite,
                  "training samples per satellite (0: split the whole training set)")
      ->capture_default_str();
  app->add_option("--ranks", a.ranks, "loopback ranks (0: one per satellite + server up to 64 satellites, else 16)");
  app->add_option("--threads", c.threads, "window prediction threads (0 = all cores)");
  app->add_option("--out", a.out, "output directory for CSV / PNG");
  app->add_option("--backend", a.backend, "communicator for the models: loopback (threads) or mpi (run under mpirun)")
      ->check(CLI::IsMember({"loopback", "mpi"}))->capture_default_str();
  app->add_flag("--transfers", a.transfers, "also write every transfer as received (transfers-<scheme>-<preset>.csv)");
}

zs::ExperimentConfig finish_config(FlArgs& a) {
  for (const auto& f : a.faults) a.cfg.faults.push_back(zs::parse_fault(f));
  return a.cfg;
}

void write_outputs(const FlArgs& a, const std::vector<zs::RunResult>& runs, const std::string& title) {
  if (a.out.empty()) return;
  std::filesystem::create_directories(a.out);
  std::vector<const zs::RunResult*> ptrs;
  for (const auto& r : runs) {
    const std::string base = a.out + "/" + r.name();
    zs::write_csv(base + ".csv", r);
    if (a.transfers) {
      std::ofstream f(a.out + "/transfers-" + r.name() + ".csv");
      f << "event,kind,from,to,start_s,end_s,duration_s,bytes,via_comm\n";
      for (const auto& t : r.learn.transfers)
        f << t.event << ',' << zs::event_kind_name(t.kind) << ',' << t.from << ',' << t.to << ',' << t.start_s << ','
          << t.end_s << ',' << (t.end_s - t.start_s) << ',' << t.bytes << ',' << (t.via_comm ? 1 : 0) << '\n';
    }
    ptrs.push_back(&r);
  }
  zs::write_plot(a.out, ptrs, title);
  std::printf("wrote %s/*.csv and %s/accuracy.png\n", a.out.c_str(), a.out.c_str());
}

// Progress on stderr (terminal only; tools/common/progress.hpp): one step per run, phases named.
void attach_progress(FlArgs& a, zen::tools::Progress& p) {
  a.cfg.on_phase = [&p](const std::string& what) { p.update(p.done(), what); };
}

int cmd_fl(FlArgs& a) {
  BackendScope backend(a);
  const auto t0 = std::chrono::steady_clock::now();
  const auto schemes = split_list(a.schemes);
  zen::tools::Progress progress("zen_orbit fl", schemes.size(), a.root);
  attach_progress(a, progress);
  zs::Experiment ex(finish_config(a));
  std::vector<zs::RunResult> runs;
  for (const std::string& scheme : schemes) {
    runs.push_back(ex.run(scheme, a.cfg.preset));
    progress.step(scheme + " done");
    progress.finish();
    std::printf("%s\n", runs.back().summary().c_str());
    std::fflush(stdout);
  }
  write_outputs(a, runs, "FL on " + ex.scenario().name + " (" + a.cfg.preset + ")");
  std::printf("total wall %.2f s (data load %.2f s)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), ex.load_wall_s());
  return 0;
}

int cmd_compare(FlArgs& a) {
  BackendScope backend(a);
  const auto t0 = std::chrono::steady_clock::now();
  const auto schemes = split_list(a.schemes);
  ZEN_ENFORCE(schemes.size() >= 2, "compare needs at least two schemes, got '" + a.schemes + "'");
  zen::tools::Progress progress("zen_orbit compare", schemes.size() * split_list(a.presets).size(), a.root);
  attach_progress(a, progress);
  zs::Experiment ex(finish_config(a));
  std::vector<zs::RunResult> runs;
  std::printf("scenario %s: %d satellites in %d planes, server(s):", ex.scenario().name.c_str(),
              ex.scenario().num_satellites(), ex.scenario().planes);
  for (const auto& s : ex.scenario().servers) std::printf(" %s", s.name.c_str());
  const std::size_t params = ex.federation().global().num_params();
  std::string train = a.cfg.train_time + " s";
  if (a.cfg.train_time == "work" || a.cfg.train_time == "measured") {
    const auto& ts = ex.timing().train_s_per_sat;
    double mean = 0, mx = 0;
    for (double t : ts) mean += t / static_cast<double>(ts.size()), mx = std::max(mx, t);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s (mean %.3g s, max %.3g s)", a.cfg.train_time.c_str(), mean, mx);
    train = buf;
  }
  std::printf("; model %s (%zu parameters; a model message is %zu B, a one-client aggregate %zu B), train time %s, "
              "target accuracy %.3f\n",
              a.cfg.model.c_str(), params, zs::model_message_bytes(params), zs::aggregate_message_bytes(params, 1),
              train.c_str(), a.cfg.target_acc);
  for (const std::string& preset : split_list(a.presets)) {
    const std::size_t first = runs.size();
    ZEN_ENFORCE(a.topk_down.size() == 1 || a.topk_down.size() == a.topk.size(),
                "--topk-down takes one fraction or as many as --topk (paired in order)");
    for (std::size_t ki = 0; ki < a.topk.size(); ++ki)
      for (const std::string& scheme : schemes) {
        const double k = a.topk[ki], kd = a.topk_down[a.topk_down.size() == 1 ? 0 : ki];
        runs.push_back(ex.run(scheme, preset, k, kd));
        progress.step(scheme + " " + preset + " done");
        progress.finish();
        std::printf("%s\n", runs.back().summary().c_str());
        std::fflush(stdout);
      }
    const zs::RunResult& b = runs[first];
    std::printf("\npreset %s (vs %s)\n", preset.c_str(), b.name().c_str());
    std::printf("| scheme | round [s] (async: per iteration of every orbit / satellite) | speed-up/round | time to %.2f [s] | speed-up to target | server transfers/round | traffic ratio | ISL transfers/round | server Mbit/round | ISL Mbit/round | final acc |\n",
                a.cfg.target_acc);
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t i = first; i < runs.size(); ++i) {
      const zs::RunResult& r = runs[i];
      char tt[64] = "not reached", su[64] = "-";
      if (r.time_to_target_s >= 0) std::snprintf(tt, sizeof(tt), "%.1f", r.time_to_target_s);
      if (r.time_to_target_s > 0 && b.time_to_target_s > 0)
        std::snprintf(su, sizeof(su), "%.2fx", b.time_to_target_s / r.time_to_target_s);
      std::string label = r.scheme;
      if (a.topk.size() > 1 || r.topk_fraction < 1 || r.topk_down_fraction < 1) {
        char kb[64];
        std::snprintf(kb, sizeof kb, " (top %g%%, down %g%%)", 100.0 * r.topk_fraction, 100.0 * r.topk_down_fraction);
        label += kb;
      }
      std::printf("| %s | %.2f | %.2fx | %s | %s | %.2f | %.2fx | %.2f | %.3f | %.3f | %.4f |\n", label.c_str(),
                  r.mean_round_s, b.mean_round_s / r.mean_round_s, tt, su, r.ps_transfers_per_round,
                  b.ps_transfers_per_round / r.ps_transfers_per_round, r.isl_transfers_per_round,
                  r.ps_bits_per_round / 1e6, r.isl_bits_per_round / 1e6, r.final_accuracy);
    }
    std::printf("\n");
    if (const zs::PaperSetup* paper =
            a.cfg.scenario_file.empty() && a.cfg.tle_file.empty() ? zs::paper_setup(a.cfg.scenario) : nullptr) {
      std::printf("paper: %s\n  published: %.0fx training-time speed-up, %.0fx fewer server transfers\n",
                  paper->citation.c_str(), paper->speedup, paper->ps_traffic_reduction);
      for (std::size_t i = first + 1; i < runs.size(); ++i) {
        const zs::RunResult& r = runs[i];
        char su[64] = "target not reached";
        if (r.time_to_target_s > 0 && b.time_to_target_s > 0)
          std::snprintf(su, sizeof(su), "%.2fx to %.2f accuracy", b.time_to_target_s / r.time_to_target_s,
                        a.cfg.target_acc);
        std::printf("  this run, %s vs %s (preset %s): %s, %.2fx per round, %.2fx fewer server transfers\n",
                    r.scheme.c_str(), b.scheme.c_str(), preset.c_str(), su, b.mean_round_s / r.mean_round_s,
                    b.ps_transfers_per_round / r.ps_transfers_per_round);
      }
      std::printf("  as the paper / its authors' simulator set it up:\n");
      for (const auto& s : paper->stated) std::printf("    - %s\n", s.c_str());
      std::printf("  where the paper is silent, chosen here:\n");
      for (const auto& s : paper->chosen) std::printf("    - %s\n", s.c_str());
      std::printf("  why the figures differ: docs/fl-orbit.md, section \"The paper's number\"\n\n");
    }
    if (!a.sweep_gflops.empty()) {
      const int rounds = b.rounds;
      std::printf("on-board compute sweep, preset %s, %d rounds, timing only (training = samples x epochs x 6 x %zu "
                  "FLOP at the given throughput, spread %.2f)\n",
                  preset.c_str(), rounds, params, a.cfg.compute_spread);
      std::printf("| GFLOP/s | train mean [s] | train max [s] |");
      for (const auto& sc : schemes) std::printf(" %s round [s] |", sc.c_str());
      for (std::size_t i = 1; i < schemes.size(); ++i) std::printf(" %s speed-up |", schemes[i].c_str());
      std::printf("\n|---|---|---|");
      for (std::size_t i = 0; i < 2 * schemes.size() - 1; ++i) std::printf("---|");
      std::printf("\n");
      for (const auto& row : ex.compute_sweep(schemes, preset, a.sweep_gflops, rounds)) {
        std::printf("| %g | %.4g | %.4g |", row.gflops, row.mean_train_s, row.max_train_s);
        for (double r : row.round_s) std::printf(" %.2f |", r);
        for (std::size_t i = 1; i < row.round_s.size(); ++i) std::printf(" %.2fx |", row.round_s[0] / row.round_s[i]);
        std::printf("\n");
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  write_outputs(a, runs, "FL on " + ex.scenario().name + ", split " + a.cfg.split + ", model " + a.cfg.model);
  std::printf("total wall %.2f s (data load %.2f s)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), ex.load_wall_s());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen_orbit: constellations, contact windows, link budgets and plots"};
  app.require_subcommand(1);

  ScenarioArgs wa;
  std::string out;
  auto* windows = app.add_subcommand("windows", "predict server contact windows (CSV)");
  add_scenario_options(windows, wa, true);
  windows->add_option("--out", out, "CSV output file (default: stdout)");

  PropagateArgs pra;
  auto* propagate = app.add_subcommand("propagate", "SGP4 TEME position and velocity of every element set (CSV)");
  propagate->add_option("--tle", pra.tle, "TLE / OMM (JSON or CSV) file")->required();
  propagate->add_option("--start", pra.start, "UTC of t = 0 (default: the earliest epoch in the file)");
  propagate->add_option("--minutes", pra.minutes, "span [min]")->required();
  propagate->add_option("--step", pra.step, "step [s]")->capture_default_str();
  propagate->add_option("--out", pra.out, "CSV output file (default: stdout)");

  ScenarioArgs la;
  double bits = 251200.0;
  auto* links = app.add_subcommand("links", "ISL and server link distances and rates per preset");
  add_scenario_options(links, la, true);
  links->add_option("--bits", bits, "model size in bits for transfer times")->capture_default_str();

  ScenarioArgs pa;
  std::string dir = "orbit_plots";
  int max_tracks = 64;
  double track_step = 60.0;
  auto* plot = app.add_subcommand("plot", "PNG visibility timeline and ground tracks (gnuplot)");
  add_scenario_options(plot, pa, true);
  plot->add_option("--out", dir, "output directory")->capture_default_str();
  plot->add_option("--max-tracks", max_tracks, "ground tracks drawn (else slot 0 of each plane)")->capture_default_str();
  plot->add_option("--track-step", track_step, "ground-track sample step [s]")->capture_default_str();

  ScenarioArgs ca;
  auto* config = app.add_subcommand("config", "print a scenario as a JSON config (editable, loadable with --config)");
  add_scenario_options(config, ca, false);

  FlArgs fa;
  fa.schemes = "ring";
  auto* fl = app.add_subcommand("fl", "federated learning over the constellation (baseline | ring | ring-async)");
  add_fl_options(fl, fa);
  fl->add_option("--topk", fa.cfg.topk,
                 "compressed updates: the fraction of the parameters every partial aggregate carries (1 = dense)")
      ->capture_default_str();
  fl->add_option("--topk-down", fa.cfg.topk_down,
                 "compressed downloads: the fraction of the parameters every model transfer (download, ring scatter) "
                 "carries (1 = dense)")
      ->capture_default_str();
  fl->add_option("--scheme,--schemes", fa.schemes,
                 "scheme(s), comma-separated: baseline, baseline-deadline, fedasync, fedprox, fedbuff, ring, ring-async")
      ->capture_default_str();
  fl->add_option("--preset", fa.cfg.preset, "link preset: ka, s, or scenario (the scenario's own link budgets)")
      ->check(CLI::IsMember({"ka", "s", "scenario"}))
      ->capture_default_str();

  FlArgs cmpa;
  cmpa.schemes = "baseline,ring";
  cmpa.presets = "ka,s";
  cmpa.cfg.target_acc = 0.80;
  cmpa.cfg.rounds = 20;
  auto* compare = app.add_subcommand("compare", "run several schemes; print speed-ups and server-traffic ratios");
  add_fl_options(compare, cmpa);
  compare->add_option("--schemes,--scheme", cmpa.schemes, "schemes, the first is the reference")->capture_default_str();
  compare->add_option("--presets,--preset", cmpa.presets,
                      "link presets, comma-separated: ka, s, scenario (the scenario's own link budgets)")
      ->capture_default_str();
  compare->add_option("--topk", cmpa.topk,
                      "compressed updates: fractions of the parameters every partial aggregate carries (top-k of "
                      "the model delta, error feedback), e.g. 1,0.1,0.01; 1 = dense")
      ->delimiter(',')
      ->capture_default_str();
  compare->add_option("--topk-down", cmpa.topk_down,
                      "compressed downloads: fractions of the parameters every model transfer carries, one or paired "
                      "with --topk in order, e.g. 1,0.1,0.01; 1 = dense")
      ->delimiter(',')
      ->capture_default_str();
  compare->add_option("--sweep-gflops", cmpa.sweep_gflops,
                      "also print each scheme's round time and the speed-up with training times from the compute "
                      "model at these on-board throughputs [GFLOP/s] (timing only)")
      ->delimiter(',');

  zen_orbit_cli::SweepArgs swa;
  auto* sweep = zen_orbit_cli::add_sweep_command(app, swa);

  // A paper's named scenario (e.g. razmi2022) brings its FL settings as defaults; options given on
  // the command line still override them (CLI11 writes only the options it parses).
  for (int i = 1; i < argc; ++i) {
    std::string v;
    const std::string arg = argv[i];
    if (arg == "--scenario" && i + 1 < argc) v = argv[i + 1];
    else if (arg.rfind("--scenario=", 0) == 0) v = arg.substr(11);
    if (const zs::PaperSetup* p = v.empty() ? nullptr : zs::paper_setup(v)) {
      zs::apply_paper_setup(*p, fa.cfg);
      zs::apply_paper_setup(*p, cmpa.cfg);
      fa.cfg.preset = "scenario";
      cmpa.presets = p->presets;
    }
  }
  CLI11_PARSE(app, argc, argv);
  try {
    if (propagate->parsed()) return cmd_propagate(pra);
    if (windows->parsed()) return cmd_windows(wa, out);
    if (links->parsed()) return cmd_links(la, bits);
    if (plot->parsed()) return cmd_plot(pa, dir, max_tracks, track_step);
    if (fl->parsed()) return cmd_fl(fa);
    if (compare->parsed()) return cmd_compare(cmpa);
    if (sweep->parsed()) return zen_orbit_cli::run_sweep_command(swa);
    if (config->parsed()) {
      std::cout << load(ca).to_json_text() << "\n";
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "zen_orbit: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
