// zen_fl_learn_check: centralized sanity check of the learning core on the real Fashion-MNIST.
// Plain synchronous FedAvg (no orbit timing): every round all clients train locally from the
// global model and the server takes the weighted mean. Prints test accuracy per round and the
// measured time per local epoch; exits 1 when the final accuracy is below --min-accuracy.
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "zen/error.hpp"
#include "zen/fl/federation.hpp"

int main(int argc, char** argv) {
  using namespace zen::fl;
  CLI::App app{"zen_fl_learn_check: FedAvg on Fashion-MNIST, accuracy per round"};
  std::string dir = default_fashion_mnist_dir();
  FederationConfig cfg;
  cfg.num_clients = 40;
  int rounds = 10;
  double min_accuracy = 0.80;
  size_t train_limit = 0;
  std::string weighting = "samples";
  app.add_option("--data-dir", dir, "directory with {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz")
      ->capture_default_str();
  app.add_option("--clients", cfg.num_clients, "number of clients K")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "FedAvg rounds")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--epochs", cfg.sgd.epochs, "local epochs E")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lr", cfg.sgd.lr, "SGD learning rate")->capture_default_str();
  app.add_option("--batch", cfg.sgd.batch_size, "minibatch size")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--model", cfg.model.kind, "logreg | mlp")->capture_default_str()
      ->check(CLI::IsMember({"logreg", "mlp"}));
  app.add_option("--hidden", cfg.model.hidden, "mlp hidden width")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--split", cfg.split, "iid | dirichlet")->capture_default_str()
      ->check(CLI::IsMember({"iid", "dirichlet"}));
  app.add_option("--alpha", cfg.alpha, "Dirichlet concentration")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--weighting", weighting, "samples | uniform")->capture_default_str()
      ->check(CLI::IsMember({"samples", "uniform"}));
  app.add_option("--seed", cfg.seed, "master seed")->capture_default_str();
  app.add_option("--train-limit", train_limit, "use only the first N training images (0 = all)")
      ->capture_default_str();
  app.add_option("--min-accuracy", min_accuracy, "exit 1 when the final test accuracy is lower")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    cfg.weighting = parse_weighting(weighting);
    const auto t_start = std::chrono::steady_clock::now();
    const Dataset train = load_fashion_mnist(dir, "train", train_limit);
    const Dataset test = load_fashion_mnist(dir, "t10k");
    const double t_load =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    Federation fed(train, test, cfg);
    std::printf("data: %zu train / %zu test images from %s (%.2f s to load)\n", train.size(),
                test.size(), dir.c_str(), t_load);
    std::printf("model: %s, %zu parameters (%zu bytes); clients %d (%s split, %zu samples at client 0); "
                "SGD lr %.3g batch %zu, %d local epoch(s); weighting %s; seed %llu\n",
                fed.global().name().c_str(), fed.global().num_params(), fed.global().num_bytes(),
                cfg.num_clients, cfg.split.c_str(), fed.client_samples(0), double(cfg.sgd.lr),
                cfg.sgd.batch_size, cfg.sgd.epochs, weighting_name(cfg.weighting),
                static_cast<unsigned long long>(cfg.seed));
    const auto e0 = fed.evaluate();
    std::printf("round %3d  test_acc %.4f  test_loss %.4f\n", 0, e0.accuracy, e0.loss);

    double train_seconds = 0;
    size_t local_epochs = 0;
    const auto t_fl = std::chrono::steady_clock::now();
    Model::Eval ev = e0;
    for (int r = 1; r <= rounds; ++r) {
      const RoundStats rs = fed.run_round(r);
      ev = fed.evaluate();
      train_seconds += rs.train_wall_seconds;
      local_epochs += rs.participants * size_t(cfg.sgd.epochs);
      const double ms_per_epoch =
          cfg.sgd.epochs > 0 ? 1e3 * rs.train_wall_seconds / double(rs.participants * cfg.sgd.epochs) : 0.0;
      std::printf("round %3d  test_acc %.4f  test_loss %.4f  train_loss %.4f  local epoch %.2f ms "
                  "(mean), %.2f ms (max client)\n",
                  r, ev.accuracy, ev.loss, rs.mean_train_loss, ms_per_epoch,
                  1e3 * rs.max_train_seconds / std::max(cfg.sgd.epochs, 1));
      std::fflush(stdout);
    }
    const double t_total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fl).count();
    std::printf("final test accuracy %.4f after %d rounds; FedAvg wall time %.2f s (local training "
                "%.2f s = %.2f ms per local epoch of %zu samples)\n",
                ev.accuracy, rounds, t_total, train_seconds,
                local_epochs ? 1e3 * train_seconds / double(local_epochs) : 0.0, fed.client_samples(0));
    if (ev.accuracy < min_accuracy) {
      std::printf("FAIL: final accuracy %.4f < required %.4f\n", ev.accuracy, min_accuracy);
      return 1;
    }
    std::printf("PASS: final accuracy %.4f >= %.4f\n", ev.accuracy, min_accuracy);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zen_fl_learn_check: %s\n", e.what());
    return 2;
  }
}
