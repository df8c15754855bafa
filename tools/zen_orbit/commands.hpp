#pragma once
// zen_orbit's subcommands, one file each (windows.cpp, propagate.cpp, links.cpp, plot.cpp, config.cpp,
// fl.cpp, compare.cpp, sweep.cpp): each registers its options on the tool's CLI11 app and returns
// what runs it once the command line is parsed (main.cpp runs the one given).
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

#include "zen/fl/sim/paper.hpp"

namespace zen_orbit_cli {

/// A registered subcommand: its CLI11 app and its body (the exit status).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_windows_command(CLI::App& app);
Command add_propagate_command(CLI::App& app);
Command add_links_command(CLI::App& app);
Command add_plot_command(CLI::App& app);
Command add_config_command(CLI::App& app);
/// `papers`: the papers' named scenarios given with --scenario, in order, whose FL settings become the
/// defaults (options given on the command line still override them).
Command add_fl_command(CLI::App& app, const std::vector<const zen::fl::sim::PaperSetup*>& papers);
Command add_compare_command(CLI::App& app, const std::vector<const zen::fl::sim::PaperSetup*>& papers);

}  // namespace zen_orbit_cli
