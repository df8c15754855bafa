#pragma once
// Published setups reproduced as named scenarios: the FL settings a paper (or its authors' code)
// fixes, what we chose where it is silent, and its headline figures to print next to ours.
#include <string>
#include <vector>

#include "zen/fl/sim/experiment.hpp"

namespace zen::fl::sim {

struct PaperSetup {
  std::string scenario;  ///< the orbit::Scenario built-in of the same name
  std::string citation;
  // FL settings of the paper (ExperimentConfig fields)
  std::string model = "logreg";
  double lr = 0.1;
  int batch = 10;
  int epochs = 1;
  std::string train_time = "60";
  std::string presets = "scenario";
  std::string split = "iid";
  std::string weighting = "samples";
  double target_acc = 0.80;
  int rounds = 20;
  // Published headline figures
  double speedup = 0.0;               ///< training-time speed-up of the proposed scheme
  double ps_traffic_reduction = 0.0;  ///< fewer model transfers at the server
  std::vector<std::string> stated;    ///< settings taken from the paper / its authors' code
  std::vector<std::string> chosen;    ///< settings the paper is silent on, and what we chose
};

/// The setup of a named scenario, or nullptr when the name is not a paper's.
const PaperSetup* paper_setup(const std::string& scenario);
/// Sets cfg's FL fields to the setup's (the caller applies its own overrides afterwards).
void apply_paper_setup(const PaperSetup& p, ExperimentConfig& cfg);

}  // namespace zen::fl::sim
