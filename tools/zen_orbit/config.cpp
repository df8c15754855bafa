// `zen_orbit config`: a scenario printed as its JSON config (editable, loadable with --config).
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "scenario_args.hpp"

namespace zen_orbit_cli {

Command add_config_command(CLI::App& app) {
  auto ca = std::make_shared<ScenarioArgs>();
  auto* config = app.add_subcommand("config", "print a scenario as a JSON config (editable, loadable with --config)");
  add_scenario_options(config, *ca, false);
  return {config, [ca] {
            std::cout << load(*ca).to_json_text() << "\n";
            return 0;
          }};
}

}  // namespace zen_orbit_cli
