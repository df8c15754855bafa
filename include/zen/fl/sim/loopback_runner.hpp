#pragma once
/// @file
/// Runs the learner on loopback threads (one process): a backend choice for tools and tests, kept out
/// of the FL library (zen::fl_loopback).
#include "zen/fl/sim/learner.hpp"

namespace zen::fl::sim {

/// execute() on `ranks` loopback threads (0: K + 1 when K <= 64, else 16; at most K + 1) and
/// merge_ranks() of their results.
LearnResult run_loopback(const Schedule& s, const Federation& fed, const Dataset& test, int ranks = 0);

/// run_loopback as an experiment's LearnRunner.
LearnRunner loopback_runner(int ranks = 0);

}  // namespace zen::fl::sim
