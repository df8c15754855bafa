// Published setups (paper.hpp).
#include "zen/fl/sim/paper.hpp"

namespace zen::fl::sim {

namespace {
PaperSetup razmi2022() {
  PaperSetup p;
  p.scenario = "razmi2022";
  p.citation = "Razmi, Matthiesen, Dekorsy, Popovski, On-Board Federated Learning for Dense LEO Constellations, "
               "IEEE ICC 2022, arXiv 2111.12769";
  p.speedup = 29.0;
  p.ps_traffic_reduction = 8.0;
  p.stated = {
      "40 satellites in 5 orbits, Walker-delta 60 deg 40/5/1 at 2000 km (authors' simulator)",
      "parameter server in MEO: 20000 km, equatorial (authors' simulator)",
      "epoch 2021-10-24 14:58:51 UTC (authors' simulator)",
      "Ka links on ISLs and server links: 20 GHz, 500 MHz, 10 W, 32.1 dBi both ends, 354 K, Shannon rate "
      "(authors' simulator)",
      "multinomial logistic regression, 7850 parameters; SGD lr 0.1, batch 10, one local epoch (authors' "
      "simulator)",
      "60 s of on-board training per round (authors' simulator)",
      "FedAvg weighted by sample count, IID data",
  };
  p.chosen = {
      "data: Fashion-MNIST (Debian dataset-fashion-mnist), 1500 images per satellite",
      "convergence: time to 0.80 test accuracy (the abstract states no criterion)",
      "propagator: circular two-body (the abstract names none)",
      "payload: the bytes each transfer puts on the link (float32 model + 32-byte header; aggregates add "
      "weight and member ids)",
      "server link time: rate integrated over the distance each transfer sees",
  };
  return p;
}
}  // namespace

const PaperSetup* paper_setup(const std::string& scenario) {
  static const std::vector<PaperSetup> all = {razmi2022()};
  for (const PaperSetup& p : all)
    if (p.scenario == scenario) return &p;
  return nullptr;
}

void apply_paper_setup(const PaperSetup& p, ExperimentConfig& cfg) {
  cfg.scenario = p.scenario;
  cfg.model = p.model;
  cfg.lr = p.lr;
  cfg.batch = p.batch;
  cfg.epochs = p.epochs;
  cfg.train_time = p.train_time;
  cfg.split = p.split;
  cfg.weighting = p.weighting;
  cfg.target_acc = p.target_acc;
  cfg.rounds = p.rounds;
}

}  // namespace zen::fl::sim
