#pragma once
// The report of `zen_orbit sweep` (sweep_report.cpp): the summary table printed after a sweep and the
// heatmap / speed-up plots written beside its CSV.
#include <map>
#include <string>
#include <vector>

#include "zen/fl/sim/sweep.hpp"

namespace zen_orbit_cli {

namespace zs = zen::fl::sim;

/// Per (scheme, stations): points, errors, how many reached `target` and how fast; then each scheme's
/// time-to-target ratio against the first scheme at the same point.
void print_summary(const std::vector<const zs::SweepRow*>& rows, const zs::SweepGrid& grid, double target);

/// heatmap[-N].png: time to target [h] over planes x satellites per plane, one panel per (stations,
/// scheme); speedup[-N].png: speed-up over the smallest constellation of the same settings against
/// the number of satellites. One pair per combination of the other axes (plots.txt lists them).
void write_plots(const std::string& out, const std::vector<const zs::SweepRow*>& rows, const zs::SweepGrid& g,
                 const std::map<std::string, zs::SweepPoint>& grid_points, double target);

}  // namespace zen_orbit_cli
