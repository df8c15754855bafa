// zen_orbit: contact windows, link budgets and plots for orbit-aware FL scenarios.
// One file per subcommand (commands.hpp lists them); this file registers them, gives a paper's named
// scenario its FL defaults, and runs the subcommand given.
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "sweep.hpp"
#include "zen/fl/sim/paper.hpp"

namespace zs = zen::fl::sim;
using namespace zen_orbit_cli;

int main(int argc, char** argv) {
  CLI::App app{"zen_orbit: constellations, contact windows, link budgets and plots"};
  app.require_subcommand(1);

  // A paper's named scenario (e.g. razmi2022) brings its FL settings as defaults; options given on
  // the command line still override them (CLI11 writes only the options it parses).
  std::vector<const zs::PaperSetup*> papers;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    const std::string arg = argv[i];
    if (arg == "--scenario" && i + 1 < argc) v = argv[i + 1];
    else if (arg.rfind("--scenario=", 0) == 0) v = arg.substr(11);
    if (const zs::PaperSetup* p = v.empty() ? nullptr : zs::paper_setup(v)) papers.push_back(p);
  }

  SweepArgs swa;
  std::vector<Command> commands{add_windows_command(app), add_propagate_command(app), add_links_command(app),
                                add_plot_command(app),    add_config_command(app),    add_fl_command(app, papers),
                                add_compare_command(app, papers)};
  commands.push_back({add_sweep_command(app, swa), [&swa] { return run_sweep_command(swa); }});
  CLI11_PARSE(app, argc, argv);
  try {
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const std::exception& e) {
    std::cerr << "zen_orbit: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
