// Survey sweeps over constellations, ground-station sets, links, compute, splits and FL schemes
// (sweep.hpp): grid expansion, the points' scenarios, contact plans shared per constellation, one
// real run per point, and the CSV rows.
#include "zen/fl/sim/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "zen/error.hpp"
#include "zen/fl/sim/timing.hpp"

namespace zen::fl::sim {

namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

int parse_stations(const std::string& s) {
  if (s == "meo") return 0;
  std::size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZEN_ENFORCE(used == s.size() && n >= 1, "sweep: stations '" + s + "' is neither a count >= 1 nor 'meo'");
  return n;
}

/// "SECONDS" or "work:GFLOPS" -> (train_time, gflops).
std::pair<std::string, double> parse_compute(const std::string& c) {
  const bool work = c.rfind("work:", 0) == 0;
  const std::string v = work ? c.substr(5) : c;
  std::size_t used = 0;
  double x = -1;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZEN_ENFORCE(used == v.size() && std::isfinite(x) && (work ? x > 0 : x >= 0),
              "sweep: compute '" + c + "' is neither training seconds (>= 0) nor work:GFLOPS (> 0)");
  return {work ? "work" : v, work ? x : 0.0};
}

void check_split(const std::string& s) {
  const std::string kind = s.substr(0, s.find(':'));
  ZEN_ENFORCE(kind == "iid" || kind == "dirichlet" || kind == "dirichlet-class" || kind == "lognormal" ||
                  kind == "orbit",
              "sweep: split '" + s + "' (iid, dirichlet:A, dirichlet-class:A, lognormal:S, orbit:C)");
}

template <class T>
void nonempty(const std::vector<T>& v, const char* axis) {
  ZEN_ENFORCE(!v.empty(), std::string("sweep: the axis '") + axis + "' has no value");
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string SweepSettings::fingerprint() const {
  const ExperimentConfig& c = fl;
  std::ostringstream os;
  os << "model=" << c.model << (c.model == "mlp" ? std::to_string(c.hidden) : "") << ";lr=" << num(c.lr)
     << ";batch=" << c.batch << ";epochs=" << c.epochs << ";rounds=" << c.rounds << ";max_rounds=" << c.max_rounds
     << ";target=" << num(c.target_acc) << ";seed=" << c.seed << ";samples_per_sat=" << c.samples_per_satellite
     << ";train_limit=" << c.train_limit << ";test_limit=" << c.test_limit << ";weighting=" << c.weighting
     << ";C=" << c.clients_per_round << ";mu=" << num(c.prox_mu) << ";prox_epochs=" << c.prox_max_epochs
     << ";buffer=" << c.buffer_size << ";server_lr=" << num(c.server_lr) << ";staleness=" << num(c.staleness_exponent)
     << ";mixing=" << num(c.fedasync_mixing) << ";deadline=" << num(c.round_deadline_s) << ";topk=" << num(c.topk)
     << ";topk_down=" << num(c.topk_down) << ";mask=" << num(elevation_mask_deg) << ";propagator=" << propagator
     << ";stations=" << stations_source;
  return os.str();
}

std::string SweepPoint::key() const {
  return constellation_key() + ";gs=" + stations + ";preset=" + preset + ";compute=" + compute + ";split=" + split +
         ";scheme=" + scheme;
}

std::string SweepPoint::constellation_key() const {
  return "P=" + std::to_string(planes) + ";S=" + std::to_string(sats_per_plane) + ";h=" + num(altitude_km) +
         ";i=" + num(inclination_deg) + ";" + pattern + ";F=" + std::to_string(phasing);
}

std::vector<SweepPoint> expand(const SweepGrid& g) {
  nonempty(g.planes, "planes");
  nonempty(g.sats_per_plane, "sats_per_plane");
  nonempty(g.altitude_km, "altitude_km");
  nonempty(g.inclination_deg, "inclination_deg");
  nonempty(g.pattern, "pattern");
  nonempty(g.phasing, "phasing");
  nonempty(g.stations, "stations");
  nonempty(g.preset, "preset");
  nonempty(g.compute, "compute");
  nonempty(g.split, "split");
  nonempty(g.scheme, "scheme");
  for (int p : g.planes) ZEN_ENFORCE(p >= 1, "sweep: planes must be >= 1, got " + std::to_string(p));
  for (int s : g.sats_per_plane) ZEN_ENFORCE(s >= 1, "sweep: satellites per plane must be >= 1, got " + std::to_string(s));
  for (double h : g.altitude_km) ZEN_ENFORCE(h > 0 && std::isfinite(h), "sweep: altitude must be > 0 km, got " + num(h));
  for (double i : g.inclination_deg)
    ZEN_ENFORCE(i >= 0 && i <= 180, "sweep: inclination must be in [0, 180] deg, got " + num(i));
  for (const auto& p : g.pattern) orbit::parse_walker_pattern(p);
  for (int f : g.phasing) ZEN_ENFORCE(f >= 0, "sweep: phasing must be >= 0, got " + std::to_string(f));
  for (const auto& s : g.stations) parse_stations(s);
  for (const auto& p : g.preset)
    ZEN_ENFORCE(p == "ka" || p == "s", "sweep: link preset '" + p + "' (ka, s)");
  for (const auto& c : g.compute) parse_compute(c);
  for (const auto& s : g.split) check_split(s);
  const auto schemes = scheme_names();
  for (const auto& s : g.scheme)
    ZEN_ENFORCE(std::find(schemes.begin(), schemes.end(), s) != schemes.end(), "sweep: unknown scheme '" + s + "'");
  std::vector<SweepPoint> out;
  for (int P : g.planes)
    for (int S : g.sats_per_plane)
      for (double h : g.altitude_km)
        for (double inc : g.inclination_deg)
          for (const auto& pat : g.pattern)
            for (int F : g.phasing)
              for (const auto& st : g.stations)
                for (const auto& pr : g.preset)
                  for (const auto& co : g.compute)
                    for (const auto& sp : g.split)
                      for (const auto& sch : g.scheme) {
                        SweepPoint p;
                        p.index = out.size();
                        p.planes = P;
                        p.sats_per_plane = S;
                        p.altitude_km = h;
                        p.inclination_deg = inc;
                        p.pattern = pat;
                        p.phasing = F % P;
                        p.phasing_axis = F;
                        p.stations = st;
                        p.preset = pr;
                        p.compute = co;
                        p.split = sp;
                        p.scheme = sch;
                        out.push_back(std::move(p));
                      }
  return out;
}

orbit::Scenario sweep_scenario(const SweepPoint& p, const SweepSettings& settings) {
  orbit::WalkerSpec w;
  w.pattern = orbit::parse_walker_pattern(p.pattern);
  w.inclination_deg = p.inclination_deg;
  w.total = p.satellites();
  w.planes = p.planes;
  w.phasing = p.phasing;
  w.altitude_m = p.altitude_km * 1e3;
  orbit::Scenario sc;
  sc.name = "sweep " + p.constellation_key();
  sc.walker = w;
  sc.satellites = orbit::make_walker(w);
  sc.planes = p.planes;
  const int n = parse_stations(p.stations);
  if (n == 0) {
    sc.servers.push_back(orbit::parse_server("meo"));
  } else {
    ZEN_ENFORCE(static_cast<std::size_t>(n) <= settings.stations.size(),
                "sweep: " + std::to_string(n) + " stations asked, the list (" + settings.stations_source + ") has " +
                    std::to_string(settings.stations.size()));
    sc.servers.assign(settings.stations.begin(), settings.stations.begin() + n);
  }
  sc.elevation_mask_deg = settings.elevation_mask_deg;
  sc.propagator = orbit::parse_propagator(settings.propagator);
  ZEN_ENFORCE(sc.propagator != orbit::Propagator::Sgp4, "sweep: Walker constellations use two-body or j2, not sgp4");
  sc.validate();
  return sc;
}

std::shared_ptr<const orbit::ContactPlan> SharedPlans::plan(const SweepPoint& p, const orbit::Scenario& sc,
                                                           double min_horizon_s) {
  const bool meo = p.stations == "meo";
  Entry* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(m_);
    auto& u = entries_[p.constellation_key() + (meo ? "|meo" : "|stations")];
    if (!u) u = std::make_unique<Entry>();
    e = u.get();
  }
  std::lock_guard<std::mutex> lock(e->m);
  if (!e->full || e->full->horizon_s() < min_horizon_s) {
    orbit::Scenario big = sc;
    if (!meo) {
      const std::size_t n = std::min(max_stations_, settings_.stations.size());
      ZEN_ENFORCE(sc.servers.size() <= n, "sweep: a point asks more stations than the grid's largest set");
      big.servers.assign(settings_.stations.begin(), settings_.stations.begin() + static_cast<std::ptrdiff_t>(n));
    }
    orbit::PredictOptions o;
    o.horizon_s = min_horizon_s;
    o.threads = 1;  // the sweep runs points in parallel instead
    e->full = std::make_shared<const orbit::ContactPlan>(orbit::ContactPlan::predict(big, o));
    e->subsets.clear();
    std::lock_guard<std::mutex> l2(m_);
    ++predictions_;
  }
  if (meo) return e->full;
  const std::string sub = std::to_string(sc.servers.size());
  auto& s = e->subsets[sub];
  if (!s) {  // the first N stations are peers 0 .. N-1 of the full plan
    std::vector<std::vector<orbit::Window>> w(static_cast<std::size_t>(e->full->num_satellites()));
    for (int k = 0; k < e->full->num_satellites(); ++k)
      for (const orbit::Window& x : e->full->windows(k))
        if (x.peer < static_cast<int>(sc.servers.size())) w[static_cast<std::size_t>(k)].push_back(x);
    s = std::make_shared<const orbit::ContactPlan>(std::move(w), e->full->horizon_s());
  }
  return s;
}

std::size_t SharedPlans::predictions() const {
  std::lock_guard<std::mutex> lock(m_);
  return predictions_;
}

std::string sweep_csv_header() {
  return "index,key,planes,sats_per_plane,satellites,altitude_km,inclination_deg,pattern,phasing,stations,preset,"
         "compute,split,scheme,status,rounds,updates,sim_time_s,time_to_target_s,rounds_to_target,final_accuracy,"
         "first_accuracy,server_transfers,server_bits,isl_transfers,isl_bytes,idle_fraction,staleness_mean,"
         "staleness_max,wall_s,settings";
}

std::string sweep_csv_row(const SweepRow& r) {
  const SweepPoint& p = r.point;
  std::string status = r.status;
  for (char& c : status)
    if (c == ',' || c == '\n' || c == '\r') c = ' ';
  char b[1024];
  std::snprintf(b, sizeof b, "%zu,%s,%d,%d,%d,%s,%s,%s,%d,%s,%s,%s,%s,%s,%s,%d,%zu,%.3f,%s,%s,%.6f,%.6f,%.0f,%.0f,%.0f,%.0f,"
                "%.6f,%.4f,%d,%.3f,",
                p.index, p.key().c_str(), p.planes, p.sats_per_plane, p.satellites(), num(p.altitude_km).c_str(),
                num(p.inclination_deg).c_str(), p.pattern.c_str(), p.phasing, p.stations.c_str(), p.preset.c_str(),
                p.compute.c_str(), p.split.c_str(), p.scheme.c_str(), status.c_str(), r.rounds, r.updates,
                r.sim_time_s, r.time_to_target_s >= 0 ? num(r.time_to_target_s).c_str() : "",
                r.rounds_to_target >= 0 ? std::to_string(r.rounds_to_target).c_str() : "", r.final_accuracy,
                r.first_accuracy, r.server_transfers, r.server_bits, r.isl_transfers, r.isl_bytes, r.idle_fraction,
                r.staleness_mean, r.staleness_max, r.wall_s);
  return std::string(b) + r.settings;
}

std::vector<SweepRow> read_sweep_csv(const std::string& path) {
  std::vector<SweepRow> out;
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) return out;
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (text.empty()) return out;
  // A run killed while writing leaves a torn last line (no newline): it is not a finished point.
  if (text.back() != '\n') text.erase(text.find_last_of('\n') == std::string::npos ? 0 : text.find_last_of('\n') + 1);
  std::istringstream in(text);
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (no == 1) {
      ZEN_ENFORCE(line == sweep_csv_header(), path + ": not a sweep CSV of this version (header differs)");
      continue;
    }
    if (line.empty()) continue;
    const auto c = split_csv(line);
    ZEN_ENFORCE(c.size() == 31, path + ":" + std::to_string(no) + ": " + std::to_string(c.size()) + " fields, expected 31");
    try {
      SweepRow r;
      SweepPoint& p = r.point;
      p.index = std::stoul(c[0]);
      p.planes = std::stoi(c[2]);
      p.sats_per_plane = std::stoi(c[3]);
      p.altitude_km = std::stod(c[5]);
      p.inclination_deg = std::stod(c[6]);
      p.pattern = c[7];
      p.phasing = std::stoi(c[8]);
      p.stations = c[9];
      p.preset = c[10];
      p.compute = c[11];
      p.split = c[12];
      p.scheme = c[13];
      ZEN_ENFORCE(p.key() == c[1], "key '" + c[1] + "' does not match the row's axes");
      r.status = c[14];
      r.rounds = std::stoi(c[15]);
      r.updates = std::stoul(c[16]);
      r.sim_time_s = std::stod(c[17]);
      r.time_to_target_s = c[18].empty() ? -1.0 : std::stod(c[18]);
      r.rounds_to_target = c[19].empty() ? -1 : std::stoi(c[19]);
      r.final_accuracy = std::stod(c[20]);
      r.first_accuracy = std::stod(c[21]);
      r.server_transfers = std::stod(c[22]);
      r.server_bits = std::stod(c[23]);
      r.isl_transfers = std::stod(c[24]);
      r.isl_bytes = std::stod(c[25]);
      r.idle_fraction = std::stod(c[26]);
      r.staleness_mean = std::stod(c[27]);
      r.staleness_max = std::stoi(c[28]);
      r.wall_s = std::stod(c[29]);
      r.settings = c[30];
      out.push_back(std::move(r));
    } catch (const std::exception& e) {
      ZEN_THROW(Result::InvalidArgument, path + ":" + std::to_string(no) + ": " + e.what());
    }
  }
  return out;
}

SweepRow run_point(const SweepPoint& p, const SweepSettings& settings, const std::shared_ptr<const Dataset>& train,
                   const std::shared_ptr<const Dataset>& test, SharedPlans& plans, const LearnRunner& learn) {
  const auto t0 = std::chrono::steady_clock::now();
  SweepRow row;
  row.point = p;
  row.settings = settings.fingerprint();
  try {
    ExperimentConfig cfg = settings.fl;
    cfg.scenario_object = std::make_shared<const orbit::Scenario>(sweep_scenario(p, settings));
    cfg.train_data = train;
    cfg.test_data = test;
    cfg.plan_source = [&plans, p](const orbit::Scenario& sc, double h) { return plans.plan(p, sc, h); };
    cfg.learn = learn;
    cfg.threads = 1;
    cfg.split = p.split;
    cfg.preset = p.preset;
    const auto [train_time, gflops] = parse_compute(p.compute);
    cfg.train_time = train_time;
    if (train_time == "work") cfg.onboard_gflops = gflops;
    cfg.on_phase = nullptr;
    Experiment ex(cfg);
    const RunResult r = ex.run(p.scheme, p.preset);
    row.rounds = r.rounds;
    row.updates = r.schedule.updates.size();
    row.sim_time_s = r.schedule.end_time_s();
    row.time_to_target_s = r.time_to_target_s;
    row.rounds_to_target = r.rounds_to_target;
    row.final_accuracy = r.final_accuracy;
    row.first_accuracy = r.learn.rows.size() > 1 ? r.learn.rows[1].accuracy : r.final_accuracy;
    row.server_transfers = r.ps_transfers_per_round * r.rounds;
    row.server_bits = r.ps_bits_per_round * r.rounds;
    row.isl_transfers = r.isl_transfers_per_round * r.rounds;
    row.isl_bytes = r.isl_bits_per_round * r.rounds / 8.0;
    row.idle_fraction = r.idle_fraction;
    row.staleness_mean = r.staleness_mean;
    row.staleness_max = r.staleness_max;
  } catch (const std::exception& e) {
    row.status = std::string("error: ") + e.what();
  }
  row.wall_s = seconds_since(t0);
  return row;
}

}  // namespace zen::fl::sim
