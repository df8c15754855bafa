// The options and outputs fl and compare share (fl_args.hpp), and the learner's backend.
#include "fl_args.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "zen/error.hpp"
#include "zen/fl/sim/loopback_runner.hpp"
#include "zen/fl/sim/wire.hpp"

namespace zen_orbit_cli {

BackendScope::BackendScope(FlArgs& a) {
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

namespace {

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

}  // namespace

void report_run(zen::tools::Progress& p, const zs::RunResult& r, const std::string& what) {
  p.step(what);
  p.finish();
  std::printf("%s\n", r.summary().c_str());
  std::fflush(stdout);
}

void finish_runs(const FlArgs& a, const std::vector<zs::RunResult>& runs, const std::string& title,
                 const zs::Experiment& ex, std::chrono::steady_clock::time_point t0) {
  write_outputs(a, runs, title);
  std::printf("total wall %.2f s (data load %.2f s)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), ex.load_wall_s());
}

void attach_progress(FlArgs& a, zen::tools::Progress& p) {
  a.cfg.on_phase = [&p](const std::string& what) { p.update(p.done(), what); };
}

}  // namespace zen_orbit_cli
