// End-to-end FL runs over a constellation: timing schedule + learner + outputs.
#include "zen/fl/sim/experiment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zen/error.hpp"
#include "zen/fl/rng.hpp"

namespace zen::fl::sim {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

orbit::Scenario make_scenario(const ExperimentConfig& cfg) {
  if (cfg.scenario_object) return *cfg.scenario_object;
  ZEN_ENFORCE(cfg.tle_file.empty() || cfg.scenario_file.empty(), "give a TLE file or a scenario file, not both");
  ZEN_ENFORCE(cfg.start_utc.empty() || !cfg.tle_file.empty(), "a start time needs a TLE file");
  orbit::Scenario sc = !cfg.tle_file.empty()        ? orbit::Scenario::from_elements_file(cfg.tle_file, cfg.start_utc)
                       : cfg.scenario_file.empty() ? orbit::Scenario::named(cfg.scenario)
                                                   : orbit::Scenario::from_file(cfg.scenario_file);
  // --server (repeatable): the listed endpoints replace the scenario's servers.
  std::vector<std::string> specs = cfg.servers;
  if (!cfg.server.empty()) specs.insert(specs.begin(), cfg.server);
  if (specs.empty()) return sc;
  sc.servers.clear();
  for (const auto& s : specs) {
    sc.servers.push_back(orbit::parse_server(s));
    sc.name += "+" + sc.servers.back().name;
  }
  return sc;
}

Experiment::Experiment(ExperimentConfig cfg) : cfg_(std::move(cfg)), sc_(make_scenario(cfg_)) {
  sc_.validate();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = cfg_.data_dir.empty() ? default_fashion_mnist_dir() : cfg_.data_dir;
  train_ = cfg_.train_data ? cfg_.train_data
                           : std::make_shared<const Dataset>(load_fashion_mnist(dir, "train", cfg_.train_limit));
  test_ = cfg_.test_data ? cfg_.test_data
                         : std::make_shared<const Dataset>(load_fashion_mnist(dir, "t10k", cfg_.test_limit));
  FederationConfig fc;
  if (cfg_.samples_per_satellite > 0) {
    fc.sample_limit = cfg_.samples_per_satellite * static_cast<std::size_t>(sc_.num_satellites());
    ZEN_ENFORCE(fc.sample_limit <= train_->size(),
                std::to_string(cfg_.samples_per_satellite) + " samples per satellite x " +
                    std::to_string(sc_.num_satellites()) + " satellites exceed the " +
                    std::to_string(train_->size()) + " training samples");
  }
  fc.num_clients = sc_.num_satellites();
  fc.model.kind = cfg_.model;
  fc.model.hidden = cfg_.hidden;
  fc.sgd.lr = cfg_.lr;
  fc.sgd.batch_size = cfg_.batch;
  fc.sgd.epochs = cfg_.epochs;
  fc.weighting = parse_weighting(cfg_.weighting);
  fc.seed = cfg_.seed;
  // --split: iid | dirichlet[:A] (per client, equal sizes) | dirichlet-class[:A] (per class,
  // unequal sizes) | lognormal[:SIGMA] (IID, unequal sizes) | orbit[:C] (each plane C classes).
  const auto colon = cfg_.split.find(':');
  const std::string kind = cfg_.split.substr(0, colon);
  auto param = [&](double dflt) {
    if (colon == std::string::npos) return dflt;
    try {
      size_t used = 0;
      const std::string v = cfg_.split.substr(colon + 1);
      const double x = std::stod(v, &used);
      ZEN_ENFORCE(used == v.size(), "trailing characters");
      return x;
    } catch (const std::exception&) {
      ZEN_THROW(Result::InvalidArgument, "split '" + cfg_.split + "': the value after ':' is not a number");
    }
  };
  if (kind == "iid") {
    ZEN_ENFORCE(colon == std::string::npos, "split 'iid' takes no value, got '" + cfg_.split + "'");
    fc.split = "iid";
  } else if (kind == "dirichlet" || kind == "dirichlet-class") {
    fc.split = "dirichlet";
    fc.alpha = param(fc.alpha);
    ZEN_ENFORCE(fc.alpha > 0, "split '" + cfg_.split + "': alpha must be positive");
    fc.dirichlet_mode = kind == "dirichlet" ? DirichletMode::PerClient : DirichletMode::PerClass;
  } else if (kind == "lognormal") {
    fc.split = "lognormal";
    fc.sigma = param(fc.sigma);
  } else if (kind == "orbit") {
    fc.split = "groups";
    const double c = param(2.0);
    ZEN_ENFORCE(c >= 1 && c == std::floor(c), "split '" + cfg_.split + "': classes per orbit must be a whole number >= 1");
    fc.classes_per_group = static_cast<int>(c);
    for (const auto& sat : sc_.satellites) fc.group_of.push_back(sat.plane);
  } else {
    ZEN_THROW(Result::InvalidArgument, "unknown split '" + cfg_.split +
                                           "' (iid, dirichlet:ALPHA, dirichlet-class:ALPHA, lognormal:SIGMA, orbit:C)");
  }
  fed_ = std::make_unique<Federation>(*train_, *test_, fc);
  load_wall_s_ = seconds_since(t0);

  timing_.model_params = fed_->global().num_params();
  timing_.faults = cfg_.faults;
  timing_.staleness_exponent = cfg_.staleness_exponent;
  timing_.fedasync_mixing = cfg_.fedasync_mixing;
  timing_.round_deadline_s = cfg_.round_deadline_s;
  timing_.epochs = cfg_.epochs;
  timing_.clients_per_round = cfg_.clients_per_round;
  timing_.prox_mu = cfg_.prox_mu;
  timing_.prox_max_epochs = cfg_.prox_max_epochs;
  timing_.buffer_size = cfg_.buffer_size;
  timing_.server_lr = cfg_.server_lr;
  if (cfg_.train_time == "work") {
    timing_.train_s_per_sat = work_train_times(cfg_.onboard_gflops);
  } else if (cfg_.train_time == "measured") {
    // One calibration epoch per satellite from the initial model, scaled to on-board time.
    ZEN_ENFORCE(cfg_.train_scale > 0, "train scale must be positive, got " + std::to_string(cfg_.train_scale));
    timing_.train_s_per_sat.resize(static_cast<std::size_t>(sc_.num_satellites()));
    for (int k = 0; k < sc_.num_satellites(); ++k) {
      const ClientUpdate u = fed_->local_update(k, fed_->global().params(), 0);
      timing_.train_s_per_sat[static_cast<std::size_t>(k)] = u.stats.wall_seconds * cfg_.train_scale;
    }
  } else {
    try {
      timing_.train_s = std::stod(cfg_.train_time);
    } catch (const std::exception&) {
      ZEN_THROW(Result::InvalidArgument,
                "train time '" + cfg_.train_time + "' is neither seconds nor 'measured' nor 'work'");
    }
  }
}

const orbit::ContactPlan& Experiment::plan_for(double min_horizon) {
  if (!plan_ || plan_->horizon_s() < min_horizon) {
    if (cfg_.plan_source) {
      plan_ = cfg_.plan_source(sc_, min_horizon);
      ZEN_CHECK_CODE(plan_ && plan_->horizon_s() >= min_horizon && plan_->num_satellites() == sc_.num_satellites(),
                     Result::InternalError, "experiment: the plan source returned no plan for the horizon");
    } else {
      orbit::PredictOptions o;
      o.horizon_s = min_horizon;
      o.threads = cfg_.threads;
      plan_ = std::make_shared<const orbit::ContactPlan>(orbit::ContactPlan::predict(sc_, o));
    }
  }
  return *plan_;
}

std::vector<double> Experiment::work_train_times(double gflops) const {
  ComputeModel m;
  m.flops_per_s = gflops * 1e9;
  m.spread = cfg_.compute_spread;
  m.seed = cfg_.seed;
  std::vector<std::size_t> samples(static_cast<std::size_t>(fed_->num_clients()));
  for (int k = 0; k < fed_->num_clients(); ++k) samples[static_cast<std::size_t>(k)] = fed_->client_samples(k);
  return compute_train_times(m, samples, cfg_.epochs, fed_->global().num_params());
}

std::vector<ComputeSweepRow> Experiment::compute_sweep(const std::vector<std::string>& schemes,
                                                       const std::string& preset, const std::vector<double>& gflops,
                                                       int rounds) {
  std::vector<ComputeSweepRow> out;
  for (double g : gflops) {
    ComputeSweepRow row;
    row.gflops = g;
    TimingConfig tc = timing_;
    tc.train_s_per_sat = work_train_times(g);
    for (double t : tc.train_s_per_sat) {
      row.mean_train_s += t / static_cast<double>(tc.train_s_per_sat.size());
      row.max_train_s = std::max(row.max_train_s, t);
    }
    for (const std::string& scheme : schemes)
      row.round_s.push_back(schedule_with(tc, scheme, preset, rounds, nullptr).end_time_s() / rounds);
    out.push_back(std::move(row));
  }
  return out;
}

Schedule Experiment::schedule(const std::string& scheme, const std::string& preset, int rounds, double* horizon_s) {
  return schedule_with(timing_, scheme, preset, rounds, horizon_s);
}

Schedule Experiment::schedule_with(TimingConfig tc, const std::string& scheme, const std::string& preset, int rounds,
                                   double* horizon_s) {
  tc.set_links(preset, sc_);
  double days = std::max(cfg_.initial_days, plan_ ? plan_->horizon_s() / 86400.0 : 0.0);
  for (;;) {
    const orbit::ContactPlan& plan = plan_for(days * 86400.0);
    const TimingContext ctx(sc_, plan, tc);
    try {
      Schedule s = simulate(scheme, ctx, rounds);
      if (horizon_s) *horizon_s = plan.horizon_s();
      return s;
    } catch (const HorizonExceeded&) {
      days = plan.horizon_s() / 86400.0 * 2.0;
      if (days > 512.0) throw;
    }
  }
}

std::size_t Experiment::topk_entries(double fraction) const { return entries(fraction, "top-k"); }

std::size_t Experiment::entries(double fraction, const char* what) const {
  ZEN_ENFORCE(fraction > 0 && fraction <= 1,
              std::string(what) + " fraction must be in (0, 1], got " + std::to_string(fraction));
  if (fraction >= 1) return 0;  // dense means
  const double n = static_cast<double>(fed_->global().num_params());
  return static_cast<std::size_t>(std::clamp(std::round(fraction * n), 1.0, n));
}

RunResult Experiment::run(const std::string& scheme, const std::string& preset) {
  return run(scheme, preset, cfg_.topk);
}

RunResult Experiment::run(const std::string& scheme, const std::string& preset, double topk_fraction) {
  return run(scheme, preset, topk_fraction, cfg_.topk_down);
}

RunResult Experiment::run(const std::string& scheme, const std::string& preset, double topk_fraction,
                          double topk_down_fraction) {
  RunResult r;
  r.scheme = scheme;
  r.preset = preset;
  r.topk_fraction = topk_fraction;
  r.topk_down_fraction = topk_down_fraction;
  r.rounds = cfg_.rounds > 0 ? cfg_.rounds : (cfg_.target_acc > 0 ? cfg_.max_rounds : 20);
  auto t0 = std::chrono::steady_clock::now();
  if (cfg_.on_phase) cfg_.on_phase(scheme + " " + preset + ": contact plan and schedule");
  TimingConfig tc = timing_;
  tc.topk = topk_entries(topk_fraction);
  tc.download_topk = entries(topk_down_fraction, "download top-k");
  r.schedule = schedule_with(tc, scheme, preset, r.rounds, &r.horizon_s);
  r.sim_wall_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  if (cfg_.on_phase) cfg_.on_phase(scheme + " " + preset + ": learning (" + std::to_string(r.schedule.updates.size()) + " global updates)");
  ZEN_ENFORCE(static_cast<bool>(cfg_.learn),
              "Experiment: ExperimentConfig::learn is not set (on_communicator(comm) or loopback_runner(ranks))");
  r.learn = cfg_.learn(r.schedule, *fed_, *test_);
  r.learn_wall_s = seconds_since(t0);
  const Schedule& s = r.schedule;
  r.mean_round_s = s.end_time_s() / r.rounds;
  double ps = 0, isl = 0, psb = 0, islb = 0;
  for (const auto& u : s.updates) {
    ps += u.ps_transfers;
    isl += u.isl_transfers;
    psb += u.ps_bits;
    islb += u.isl_bits;
  }
  r.ps_transfers_per_round = ps / r.rounds;
  r.isl_transfers_per_round = isl / r.rounds;
  r.ps_bits_per_round = psb / r.rounds;
  r.isl_bits_per_round = islb / r.rounds;
  if (cfg_.target_acc > 0) {
    for (std::size_t i = 0; i < r.learn.rows.size(); ++i) {
      if (r.learn.rows[i].accuracy >= cfg_.target_acc) {
        r.time_to_target_s = r.learn.rows[i].time_s;
        r.rounds_to_target = r.learn.rows[i].version;
        if (cfg_.rounds == 0) r.learn.rows.resize(i + 1);
        break;
      }
    }
  }
  r.final_accuracy = r.learn.rows.empty() ? 0.0 : r.learn.rows.back().accuracy;
  const ScheduleMetrics m = schedule_metrics(s);
  r.idle_fraction = m.idle_fraction;
  r.staleness_mean = m.staleness_mean;
  r.staleness_max = m.staleness_max;
  return r;
}

ScheduleMetrics schedule_metrics(const Schedule& s) {
  ScheduleMetrics m;
  const double end = s.end_time_s();
  if (end > 0 && s.num_satellites > 0) {
    double busy = 0.0;
    for (const Event& e : s.events)
      if (e.kind == EventKind::Train && !e.failed) busy += std::max(0.0, std::min(e.end_s, end) - std::min(e.start_s, end));
    m.idle_fraction = 1.0 - busy / (end * static_cast<double>(s.num_satellites));
  }
  double sum = 0.0;
  std::size_t n = 0;
  for (const UpdateRecord& u : s.updates) {
    if (u.staleness.empty()) {  // synchronous: every contribution is fresh
      n += u.members.size();
      continue;
    }
    for (int t : u.staleness) {
      sum += t;
      m.staleness_max = std::max(m.staleness_max, t);
      ++n;
    }
  }
  m.staleness_mean = n ? sum / static_cast<double>(n) : 0.0;
  return m;
}

std::string RunResult::name() const {
  std::string n = scheme + "-" + preset;
  if (topk_fraction < 1) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "-top%g", topk_fraction);
    n += buf;
  }
  if (topk_down_fraction < 1) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "-down%g", topk_down_fraction);
    n += buf;
  }
  return n;
}

std::string RunResult::summary() const {
  // No target set, or not reached: "none" instead of a negative sentinel.
  char tt[32] = "none", ut[32] = "none";
  if (time_to_target_s >= 0) std::snprintf(tt, sizeof(tt), "%.1f", time_to_target_s);
  if (rounds_to_target >= 0) std::snprintf(ut, sizeof(ut), "%d", rounds_to_target);
  char buf[768];
  std::snprintf(buf, sizeof(buf),
                "scheme=%s preset=%s topk=%g topk_down=%g rounds=%d updates=%zu sim_time_s=%.1f round_s=%.2f ps_transfers/round=%.2f "
                "isl_transfers/round=%.2f final_acc=%.4f time_to_target_s=%s updates_to_target=%s "
                "comm_messages=%llu comm_MB=%.2f lost=%zu skipped=%zu idle_fraction=%.4f staleness_mean=%.3f "
                "staleness_max=%d sim_wall_s=%.2f learn_wall_s=%.2f",
                scheme.c_str(), preset.c_str(), topk_fraction, topk_down_fraction, rounds, schedule.updates.size(), schedule.end_time_s(), mean_round_s,
                ps_transfers_per_round, isl_transfers_per_round, final_accuracy, tt, ut,
                static_cast<unsigned long long>(learn.comm_messages), static_cast<double>(learn.comm_bytes_sent) / 1e6,
                schedule.lost.size(), schedule.skipped.size(), idle_fraction, staleness_mean, staleness_max, sim_wall_s,
                learn_wall_s);
  return buf;
}

void write_csv(const std::string& path, const RunResult& r) {
  std::ofstream f(path);
  ZEN_CHECK_CODE(f.good(), Result::SystemError, "cannot write '" + path + "'");
  f << "time_s,round,accuracy,loss,ps_transfers,ps_bits,isl_transfers,isl_bits\n";
  char line[256];
  for (const LearnRow& row : r.learn.rows) {
    std::snprintf(line, sizeof(line), "%.6f,%d,%.6f,%.6f,%d,%.0f,%d,%.0f\n", row.time_s, row.round, row.accuracy,
                  row.loss, row.ps_transfers, row.ps_bits, row.isl_transfers, row.isl_bits);
    f << line;
  }
  ZEN_CHECK_CODE(f.good(), Result::SystemError, "write to '" + path + "' failed");
}

void write_plot(const std::string& dir, const std::vector<const RunResult*>& runs, const std::string& title) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const fs::path d(dir);
  const fs::path script = d / "accuracy.gp";
  {
    std::ofstream f(script);
    f << "set terminal pngcairo size 1200,700\n"
      << "set output '" << (d / "accuracy.png").string() << "'\n"
      << "set title '" << title << "'\n"
      << "set xlabel 'simulated time [h] (log scale)'\nset ylabel 'test accuracy'\n"
      << "set logscale x\nset grid\nset key bottom right\nset datafile separator ','\n"
      << "plot ";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const fs::path csv = d / (runs[i]->name() + ".csv");
      if (i) f << ", ";
      f << "'" << csv.string() << "' every ::2 using ($1/3600):3 with linespoints title '" << runs[i]->name() << "'";
    }
    f << "\n";
  }
  const std::string cmd = "gnuplot '" + script.string() + "'";
  const int rc = std::system(cmd.c_str());
  ZEN_CHECK_CODE(rc == 0, Result::SystemError, "'" + cmd + "' failed with status " + std::to_string(rc));
}

}  // namespace zen::fl::sim
