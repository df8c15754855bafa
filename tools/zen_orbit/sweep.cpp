// `zen_orbit sweep` (sweep.hpp): grid from a JSON file and / or flags, dry run with an estimate,
// parallel resumable execution with progress, and the CSV; the summary and the heatmap / speed-up
// plots are in sweep_report.cpp.
#include "sweep.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/progress.hpp"
#include "lists.hpp"
#include "sweep_report.hpp"
#include "zen/error.hpp"
#include "zen/fl/model.hpp"
#include "zen/fl/sim/loopback_runner.hpp"
#include "zen/fl/sim/sweep.hpp"
#include "zen/fl/train.hpp"

namespace zen_orbit_cli {

namespace zs = zen::fl::sim;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
std::vector<T> parse_list(const std::string& s, const char* what) {
  std::vector<T> out;
  for (const std::string& x : split_list(s, true)) {
    std::istringstream in(x);
    T v{};
    in >> v;
    ZEN_ENFORCE(!in.fail() && in.eof(), std::string("sweep: --") + what + ": '" + x + "' is not a number");
    out.push_back(v);
  }
  return out;
}

/// JSON value of an axis as strings (numbers as written, e.g. stations 1 -> "1").
std::vector<std::string> json_strings(const json& v, const std::string& axis) {
  ZEN_ENFORCE(v.is_array(), "sweep grid: '" + axis + "' must be a list");
  std::vector<std::string> out;
  for (const json& x : v) {
    if (x.is_string()) out.push_back(x.get<std::string>());
    else if (x.is_number_integer()) out.push_back(std::to_string(x.get<long long>()));
    else if (x.is_number()) {
      std::ostringstream os;
      os << x.get<double>();
      out.push_back(os.str());
    } else {
      ZEN_THROW(zen::Result::InvalidArgument, "sweep grid: '" + axis + "' holds " + x.dump());
    }
  }
  return out;
}

void check_keys(const json& j, const std::set<std::string>& known, const std::string& where) {
  ZEN_ENFORCE(j.is_object(), "sweep grid: " + where + " must be an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (known.count(it.key())) continue;
    std::string all;
    for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
    ZEN_THROW(zen::Result::InvalidArgument, "sweep grid: unknown field '" + it.key() + "' in " + where + " (known: " + all + ")");
  }
}

struct Plan {
  zs::SweepGrid grid;
  zs::SweepSettings settings;
  std::string name = "sweep";
  std::string data_dir;
  std::string stations_file = ZEN_DEFAULT_STATIONS;
};

/// Grid and settings: built-in defaults, then the JSON file, then the flags given.
Plan make_plan(const SweepArgs& a) {
  Plan p;
  auto& fl = p.settings.fl;
  fl.rounds = 20;
  fl.target_acc = 0.70;
  fl.samples_per_satellite = 600;
  fl.test_limit = 2000;
  fl.clients_per_round = 10;
  if (!a.grid_file.empty()) {
    std::ifstream f(a.grid_file);
    ZEN_CHECK_CODE(f.good(), zen::Result::SystemError, "cannot read sweep grid '" + a.grid_file + "'");
    json j;
    try {
      f >> j;
    } catch (const std::exception& e) {
      ZEN_THROW(zen::Result::InvalidArgument, "sweep grid '" + a.grid_file + "': " + e.what());
    }
    check_keys(j, {"name", "description", "stations_file", "grid", "fl"}, "the top level");
    const fs::path dir = fs::path(a.grid_file).parent_path();
    if (j.contains("name")) p.name = j["name"].get<std::string>();
    if (j.contains("stations_file")) p.stations_file = (dir / j["stations_file"].get<std::string>()).string();
    if (j.contains("grid")) {
      const json& g = j["grid"];
      check_keys(g, {"planes", "sats_per_plane", "altitude_km", "inclination_deg", "pattern", "phasing", "stations",
                     "preset", "compute", "split", "scheme"},
                 "\"grid\"");
      auto ints = [&](const char* k, std::vector<int>& v) {
        if (!g.contains(k)) return;
        std::string s;
        for (const auto& x : json_strings(g[k], k)) s += x + ",";
        v = parse_list<int>(s, k);
      };
      auto dbls = [&](const char* k, std::vector<double>& v) {
        if (!g.contains(k)) return;
        std::string s;
        for (const auto& x : json_strings(g[k], k)) s += x + ",";
        v = parse_list<double>(s, k);
      };
      auto strs = [&](const char* k, std::vector<std::string>& v) {
        if (g.contains(k)) v = json_strings(g[k], k);
      };
      ints("planes", p.grid.planes);
      ints("sats_per_plane", p.grid.sats_per_plane);
      dbls("altitude_km", p.grid.altitude_km);
      dbls("inclination_deg", p.grid.inclination_deg);
      strs("pattern", p.grid.pattern);
      ints("phasing", p.grid.phasing);
      strs("stations", p.grid.stations);
      strs("preset", p.grid.preset);
      strs("compute", p.grid.compute);
      strs("split", p.grid.split);
      strs("scheme", p.grid.scheme);
    }
    if (j.contains("fl")) {
      const json& s = j["fl"];
      check_keys(s, {"rounds", "target_acc", "samples_per_sat", "test_limit", "clients_per_round", "model", "hidden",
                     "lr", "batch", "epochs", "seed", "prox_mu", "prox_max_epochs", "buffer", "server_lr",
                     "staleness", "topk", "topk_down", "mask_deg", "propagator", "days", "data_dir"},
                 "\"fl\"");
      if (s.contains("rounds")) fl.rounds = s["rounds"].get<int>();
      if (s.contains("target_acc")) fl.target_acc = s["target_acc"].get<double>();
      if (s.contains("samples_per_sat")) fl.samples_per_satellite = s["samples_per_sat"].get<std::size_t>();
      if (s.contains("test_limit")) fl.test_limit = s["test_limit"].get<std::size_t>();
      if (s.contains("clients_per_round")) fl.clients_per_round = s["clients_per_round"].get<int>();
      if (s.contains("model")) fl.model = s["model"].get<std::string>();
      if (s.contains("hidden")) fl.hidden = s["hidden"].get<int>();
      if (s.contains("lr")) fl.lr = s["lr"].get<float>();
      if (s.contains("batch")) fl.batch = s["batch"].get<std::size_t>();
      if (s.contains("epochs")) fl.epochs = s["epochs"].get<int>();
      if (s.contains("seed")) fl.seed = s["seed"].get<uint64_t>();
      if (s.contains("prox_mu")) fl.prox_mu = s["prox_mu"].get<double>();
      if (s.contains("prox_max_epochs")) fl.prox_max_epochs = s["prox_max_epochs"].get<int>();
      if (s.contains("buffer")) fl.buffer_size = s["buffer"].get<int>();
      if (s.contains("server_lr")) fl.server_lr = s["server_lr"].get<double>();
      if (s.contains("staleness")) fl.staleness_exponent = s["staleness"].get<double>();
      if (s.contains("topk")) fl.topk = s["topk"].get<double>();
      if (s.contains("topk_down")) fl.topk_down = s["topk_down"].get<double>();
      if (s.contains("mask_deg")) p.settings.elevation_mask_deg = s["mask_deg"].get<double>();
      if (s.contains("propagator")) p.settings.propagator = s["propagator"].get<std::string>();
      if (s.contains("days")) fl.initial_days = s["days"].get<double>();
      if (s.contains("data_dir")) p.data_dir = s["data_dir"].get<std::string>();
    }
  }
  const CLI::App& c = *a.cmd;
  auto given = [&](const char* opt) { return c.get_option(opt)->count() > 0; };
  if (given("--planes")) p.grid.planes = parse_list<int>(a.planes, "planes");
  if (given("--sats-per-plane")) p.grid.sats_per_plane = parse_list<int>(a.sats_per_plane, "sats-per-plane");
  if (given("--altitude-km")) p.grid.altitude_km = parse_list<double>(a.altitude_km, "altitude-km");
  if (given("--inclination-deg")) p.grid.inclination_deg = parse_list<double>(a.inclination_deg, "inclination-deg");
  if (given("--pattern")) p.grid.pattern = split_list(a.pattern, true);
  if (given("--phasing")) p.grid.phasing = parse_list<int>(a.phasing, "phasing");
  if (given("--stations")) p.grid.stations = split_list(a.stations, true);
  if (given("--presets")) p.grid.preset = split_list(a.presets, true);
  if (given("--compute")) p.grid.compute = split_list(a.compute, true);
  if (given("--splits")) p.grid.split = split_list(a.splits, true);
  if (given("--schemes")) p.grid.scheme = split_list(a.schemes, true);
  if (given("--stations-file")) p.stations_file = a.stations_file;
  if (given("--data-dir")) p.data_dir = a.data_dir;
  if (given("--rounds")) fl.rounds = a.rounds;
  if (given("--target-acc")) fl.target_acc = a.target_acc;
  if (given("--samples-per-sat")) fl.samples_per_satellite = a.samples_per_sat;
  if (given("--test-limit")) fl.test_limit = a.test_limit;
  if (given("--clients-per-round")) fl.clients_per_round = a.clients_per_round;
  if (given("--model")) fl.model = a.model;
  if (given("--hidden")) fl.hidden = a.hidden;
  if (given("--lr")) fl.lr = static_cast<float>(a.lr);
  if (given("--batch")) fl.batch = static_cast<std::size_t>(a.batch);
  if (given("--epochs")) fl.epochs = a.epochs;
  if (given("--seed")) fl.seed = a.seed;
  if (given("--prox-mu")) fl.prox_mu = a.prox_mu;
  if (given("--prox-max-epochs")) fl.prox_max_epochs = a.prox_max_epochs;
  if (given("--buffer")) fl.buffer_size = a.buffer;
  if (given("--server-lr")) fl.server_lr = a.server_lr;
  if (given("--staleness")) fl.staleness_exponent = a.staleness;
  if (given("--topk")) fl.topk = a.topk;
  if (given("--topk-down")) fl.topk_down = a.topk_down;
  if (given("--mask")) p.settings.elevation_mask_deg = a.mask_deg;
  if (given("--propagator")) p.settings.propagator = a.propagator;
  ZEN_ENFORCE(fl.rounds > 0, "sweep: rounds must be positive, got " + std::to_string(fl.rounds));
  // The station list is needed only when a point asks for stations.
  const bool need = std::any_of(p.grid.stations.begin(), p.grid.stations.end(), [](const auto& s) { return s != "meo"; });
  if (need) {
    p.settings.stations = zen::orbit::read_ground_stations(p.stations_file);
    p.settings.stations_source = fs::path(p.stations_file).filename().string();
    for (const auto& s : p.settings.stations) p.settings.stations_source += ":" + s.name;
  }
  return p;
}

std::size_t max_stations(const zs::SweepGrid& g) {
  std::size_t n = 0;
  for (const auto& s : g.stations)
    if (s != "meo") n = std::max<std::size_t>(n, std::stoul(s));
  return n;
}

/// Local trainings a point runs (the work that dominates its cost).
double trainings(const zs::SweepPoint& p, const zs::ExperimentConfig& fl) {
  const int K = p.satellites();
  const int C = fl.clients_per_round > 0 ? std::min(fl.clients_per_round, K) : K;
  const double R = fl.rounds;
  if (p.scheme == "ring" || p.scheme == "ring-async" || p.scheme == "fedasync") return R * K;
  if (p.scheme == "fedbuff") return R * std::min(fl.buffer_size, C);
  if (p.scheme == "fedprox") return R * C * fl.prox_max_epochs;  // an upper bound: epochs vary
  return R * C;
}

/// Dry-run estimate: local epochs and evaluations timed on synthetic data of the same shape on this
/// machine, window prediction timed on one small constellation, scaled to the grid, over the jobs.
double estimate_seconds(const std::vector<zs::SweepPoint>& todo, const Plan& plan, unsigned jobs) {
  const auto& fl = plan.settings.fl;
  const std::size_t n = fl.samples_per_satellite > 0 ? fl.samples_per_satellite : 600;
  zen::fl::Dataset d;
  d.dim = 784;
  d.num_classes = 10;
  d.x.resize(n * 784);
  d.y.resize(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> px(0.0f, 1.0f);
  for (auto& v : d.x) v = px(rng);
  for (std::size_t i = 0; i < n; ++i) d.y[i] = static_cast<int32_t>(i % 10);
  auto model = zen::fl::make_model({fl.model, 784, 10, fl.hidden});
  model->init(1);
  zen::fl::SgdConfig sgd{fl.lr, fl.batch, fl.epochs};
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) zen::fl::train_local(*model, d, sgd, static_cast<uint64_t>(i));
  const double t_train = seconds_since(t0) / 5.0;
  t0 = std::chrono::steady_clock::now();
  model->evaluate(d);
  const double t_eval = seconds_since(t0) * static_cast<double>(fl.test_limit > 0 ? fl.test_limit : 10000) / n;
  // Windows: a 10-satellite constellation to the largest station set for the initial horizon.
  zs::SweepPoint probe;
  probe.planes = 2;
  probe.sats_per_plane = 5;
  probe.stations = plan.grid.stations.front();
  const zen::orbit::Scenario sc = zs::sweep_scenario(probe, plan.settings);
  t0 = std::chrono::steady_clock::now();
  zen::orbit::PredictOptions o;
  o.horizon_s = fl.initial_days * 86400.0;
  o.threads = 1;
  zen::orbit::ContactPlan::predict(sc, o);
  const double t_win_per_pair = seconds_since(t0) / (10.0 * static_cast<double>(sc.servers.size()));
  double work = 0.0;
  std::set<std::string> constellations;
  const std::size_t gs = std::max<std::size_t>(1, max_stations(plan.grid));
  for (const auto& p : todo) {
    work += trainings(p, fl) * t_train + fl.rounds * t_eval + 0.005;  // + schedule and thread start-up
    if (constellations.insert(p.constellation_key()).second)
      work += 2.0 * t_win_per_pair * p.satellites() * static_cast<double>(gs);  // horizon doublings ~ 2x
  }
  return work / std::max(1u, jobs);
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& a) {
  CLI::App* s = app.add_subcommand(
      "sweep", "survey grid: constellations x ground stations x links x compute x splits x FL schemes, real training "
               "per point (CSV, heatmap and speed-up PNGs; resumable)");
  a.cmd = s;
  s->add_option("--grid", a.grid_file, "JSON grid file (docs/fl-orbit.md); the flags below override its values");
  s->add_option("--planes", a.planes, "planes (clusters), e.g. 1,2,5,10");
  s->add_option("--sats-per-plane", a.sats_per_plane, "satellites per plane, e.g. 1,2,5,10");
  s->add_option("--altitude-km", a.altitude_km, "altitudes [km] (default 500)");
  s->add_option("--inclination-deg", a.inclination_deg, "inclinations [deg] (default 90)");
  s->add_option("--pattern", a.pattern, "Walker patterns: delta, star (default star)");
  s->add_option("--phasing", a.phasing, "Walker phasing F, taken modulo the planes (default 1)");
  s->add_option("--stations", a.stations, "ground-station sets: N = the first N of --stations-file, or meo (default 1)");
  s->add_option("--presets", a.presets, "link presets: ka, s (default ka)");
  s->add_option("--compute", a.compute, "on-board training: SECONDS per round or work:GFLOPS (default 60)");
  s->add_option("--splits", a.splits, "data splits: iid, dirichlet:A, dirichlet-class:A, lognormal:S, orbit:C");
  s->add_option("--schemes", a.schemes,
                "FL schemes: baseline, baseline-deadline, fedasync, fedprox, fedbuff, ring, ring-async (default baseline)");
  s->add_option("--stations-file", a.stations_file,
                "ordered ground-station list name,lat,lon[,alt_m] (default tests/data/ground-stations/landsat13.csv)");
  s->add_option("--data-dir", a.data_dir, "Fashion-MNIST IDX directory");
  s->add_option("--rounds", a.rounds, "sync rounds / async updates per point (default 20)");
  s->add_option("--target-acc", a.target_acc, "target test accuracy (default 0.70)");
  s->add_option("--samples-per-sat", a.samples_per_sat, "training samples per satellite (default 600)");
  s->add_option("--test-limit", a.test_limit, "test images evaluated per global update (default 2000)");
  s->add_option("--clients-per-round", a.clients_per_round,
                "first C idle satellites in contact per round / fedbuff concurrency (default 10, 0 = all)");
  s->add_option("--model", a.model, "logreg or mlp")->check(CLI::IsMember({"logreg", "mlp"}));
  s->add_option("--hidden", a.hidden, "mlp hidden units");
  s->add_option("--lr", a.lr, "SGD learning rate");
  s->add_option("--batch", a.batch, "SGD batch size");
  s->add_option("--epochs", a.epochs, "local epochs");
  s->add_option("--seed", a.seed, "master seed");
  s->add_option("--prox-mu", a.prox_mu, "fedprox: proximal term mu");
  s->add_option("--prox-max-epochs", a.prox_max_epochs, "fedprox: most local epochs before the next contact");
  s->add_option("--buffer", a.buffer, "fedbuff: deltas per server update");
  s->add_option("--server-lr", a.server_lr, "fedbuff: server step");
  s->add_option("--staleness", a.staleness, "staleness exponent a of (1 + tau)^-a");
  s->add_option("--topk", a.topk, "compressed uploads: fraction of the parameters (1 = dense)");
  s->add_option("--topk-down", a.topk_down, "compressed downloads: fraction of the parameters (1 = dense)");
  s->add_option("--mask", a.mask_deg, "ground-station elevation mask [deg] (default 10)");
  s->add_option("--propagator", a.propagator, "two-body or j2")->check(CLI::IsMember({"two-body", "j2"}));
  s->add_option("--out", a.out, "output directory: sweep.csv, heatmap.png, speedup.png")->capture_default_str();
  s->add_option("--jobs", a.jobs, "points run at once (0 = all cores)");
  s->add_option("--ranks", a.ranks, "loopback ranks of each run's learner")->capture_default_str();
  s->add_flag("--dry-run", a.dry_run, "print the grid size and an estimated run time, run nothing");
  s->add_flag("--no-plots", a.no_plots, "write the CSV only");
  return s;
}

int run_sweep_command(const SweepArgs& a) {
  const auto t_start = std::chrono::steady_clock::now();
  const Plan plan = make_plan(a);
  const std::vector<zs::SweepPoint> points = zs::expand(plan.grid);
  const std::string fp = plan.settings.fingerprint();
  const fs::path csv = fs::path(a.out) / "sweep.csv";
  std::vector<zs::SweepRow> done_rows = zs::read_sweep_csv(csv.string());
  std::map<std::string, std::size_t> done;  // key -> row
  for (std::size_t i = 0; i < done_rows.size(); ++i) {
    ZEN_ENFORCE(done_rows[i].settings == fp, csv.string() + " was written with other settings (" +
                                                 done_rows[i].settings + "), this run has " + fp +
                                                 ": use another --out");
    done[done_rows[i].point.key()] = i;
  }
  std::vector<zs::SweepPoint> todo;
  for (const auto& p : points)
    if (!done.count(p.key())) todo.push_back(p);
  const unsigned jobs = a.jobs ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::set<std::string> constellations;
  for (const auto& p : points) constellations.insert(p.constellation_key());
  std::printf("sweep %s: %zu points (%zu constellations), %zu already in %s, %zu to run on %u jobs\n",
              plan.name.c_str(), points.size(), constellations.size(), points.size() - todo.size(), csv.c_str(),
              todo.size(), jobs);
  std::printf("settings: %s\n", fp.c_str());
  if (a.dry_run) {
    std::printf("estimated run time: %.0f s (local epochs and evaluations timed on synthetic data here, window "
                "prediction on a 10-satellite probe; fedprox at its epoch cap)\n",
                estimate_seconds(todo, plan, jobs));
    return 0;
  }
  fs::create_directories(a.out);
  const auto t_load = std::chrono::steady_clock::now();
  const std::string dir = plan.data_dir.empty() ? zen::fl::default_fashion_mnist_dir() : plan.data_dir;
  std::size_t need = 0;
  for (const auto& p : todo)
    need = std::max(need, plan.settings.fl.samples_per_satellite * static_cast<std::size_t>(p.satellites()));
  std::shared_ptr<const zen::fl::Dataset> train, test;
  if (!todo.empty()) {  // loaded once, shared by every point
    train = std::make_shared<const zen::fl::Dataset>(
        zen::fl::load_fashion_mnist(dir, "train", plan.settings.fl.samples_per_satellite > 0 ? need : 0));
    test = std::make_shared<const zen::fl::Dataset>(zen::fl::load_fashion_mnist(dir, "t10k", plan.settings.fl.test_limit));
  }
  const double load_s = seconds_since(t_load);
  zs::SharedPlans plans(plan.settings, max_stations(plan.grid));
  const zs::LearnRunner learn = zs::loopback_runner(a.ranks);
  std::ofstream out(csv, std::ios::app);
  ZEN_CHECK_CODE(out.good(), zen::Result::SystemError, "cannot write '" + csv.string() + "'");
  if (done_rows.empty()) {
    out.seekp(0, std::ios::end);
    if (out.tellp() == 0) out << zs::sweep_csv_header() << "\n";
  }
  out.flush();
  zen::tools::Progress progress("zen_orbit sweep", todo.size());
  std::mutex m;
  std::atomic<std::size_t> next{0};
  std::vector<zs::SweepRow> new_rows;
  std::exception_ptr failure;
  auto worker = [&] {
    for (;;) {
      const std::size_t i = next++;
      if (i >= todo.size()) return;
      try {
        zs::SweepRow r = zs::run_point(todo[i], plan.settings, train, test, plans, learn);
        std::lock_guard<std::mutex> lock(m);
        out << zs::sweep_csv_row(r) << "\n";
        out.flush();
        progress.step(r.point.key());
        new_rows.push_back(std::move(r));
      } catch (...) {  // I/O and internal errors stop the sweep (point errors are rows)
        std::lock_guard<std::mutex> lock(m);
        if (!failure) failure = std::current_exception();
        next = todo.size();
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 0; j < std::min<std::size_t>(jobs, std::max<std::size_t>(1, todo.size())); ++j)
    threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  progress.finish();
  out.close();
  if (failure) std::rethrow_exception(failure);
  const double run_s = seconds_since(t_start);
  // Rewrite the CSV in grid order (rows of points not in this grid stay, after them).
  std::vector<zs::SweepRow> all = std::move(done_rows);
  all.insert(all.end(), std::make_move_iterator(new_rows.begin()), std::make_move_iterator(new_rows.end()));
  std::map<std::string, std::size_t> order;
  for (const auto& p : points) order[p.key()] = p.index;
  std::stable_sort(all.begin(), all.end(), [&](const zs::SweepRow& x, const zs::SweepRow& y) {
    const auto ix = order.find(x.point.key()), iy = order.find(y.point.key());
    const std::size_t a1 = ix == order.end() ? SIZE_MAX : ix->second, b1 = iy == order.end() ? SIZE_MAX : iy->second;
    return a1 < b1;
  });
  {
    const fs::path tmp = csv.string() + ".tmp";
    std::ofstream f(tmp);
    f << zs::sweep_csv_header() << "\n";
    for (auto& r : all) {
      if (const auto it = order.find(r.point.key()); it != order.end()) r.point.index = it->second;
      f << zs::sweep_csv_row(r) << "\n";
    }
    f.close();
    ZEN_CHECK_CODE(f.good(), zen::Result::SystemError, "write to '" + tmp.string() + "' failed");
    fs::rename(tmp, csv);
  }
  std::vector<const zs::SweepRow*> in_grid;
  int errors = 0;
  for (const auto& r : all)
    if (order.count(r.point.key())) {
      in_grid.push_back(&r);
      if (r.status != "ok") ++errors;
    }
  print_summary(in_grid, plan.grid, plan.settings.fl.target_acc);
  if (!a.no_plots && !in_grid.empty()) {
    std::map<std::string, zs::SweepPoint> grid_points;
    for (const auto& p : points) grid_points[p.key()] = p;
    write_plots(a.out, in_grid, plan.grid, grid_points, plan.settings.fl.target_acc);
    std::printf("wrote %s and the plots listed in %s\n", csv.c_str(), (fs::path(a.out) / "plots.txt").c_str());
  } else {
    std::printf("wrote %s\n", csv.c_str());
  }
  std::printf("ran %zu points (%d errors in the grid) in %.1f s wall on %u jobs (data load %.2f s, %zu window "
              "predictions)\n",
              todo.size(), errors, run_s, jobs, load_s, plans.predictions());
  return 0;
}

}  // namespace zen_orbit_cli
