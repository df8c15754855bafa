#pragma once
// zen_perf's options (the Config a run is made of), their command line and what they turn into:
// the sizes, the list of contenders (--scheme) and the SchemeOptions every plan is made with.
#include <cstdint>
#include <string>
#include <vector>

#include "zen/schemes/scheme.hpp"

namespace zen_perf {

struct Config {
  std::string b = "1M", e = "1M";
  double f = 2.0;
  double density = 0.01;
  double overlap = -1;  // < 0: (n + 1) / 2
  double skew = 0.0;
  std::string dtype = "f32";
  uint32_t row_width = 1;
  int iters = 20, warmup = 5;
  int check = 1;
  std::string schemes = "all";
  std::string pull = "auto", push = "auto";
  std::string output = "dense";
  std::string index = "i64";
  std::string trace_dir, dump_dir, json_file;
  int threads = 0;
  uint64_t seed = 42;
  int cpu_threads = 0;
  uint32_t block_size = 256;
  double sparcml_switch = 0.0;
  bool explain = false;
  bool phase_cpu = false;  // --phase-cpu: per-phase CPU time (SchemeOptions::phase_cpu_time) in the report
  double auto_explore = zen::SchemeOptions::Auto{}.explore_within, auto_budget = zen::SchemeOptions::Auto{}.explore_budget;
  double auto_gbps = 25.0, auto_alpha_us = 20.0;
  std::string auto_cpu = "default";  // auto's CPU terms per scheme: default, none, or scheme=VALUE_S/DENSE_S,...
  int auto_every = 500;
  uint64_t auto_sample_rows = zen::SchemeOptions::Auto{}.sample_rows;
  int auto_cores = zen::SchemeOptions::Auto{}.cores;  ///< SchemeOptions::Auto::cores (0: found, < 0: never shared)
  double auto_learn_link = zen::SchemeOptions::Auto{}.learn_link;  ///< SchemeOptions::Auto::learn_link (<= 1: never)
  std::string auto_cache;  ///< SchemeOptions::Auto::cache: a file of remembered decisions (empty: none)
  int prelude = 0;  // untimed calls of the raw MPI allgatherv on each group's input before its first timed call
  int auto_settle = 1;  // 1: auto's first decision (statistics, exploration) is finished before timing
  std::string node_size = "host";  // hier_<scheme>: "host" (MPI shared-memory split) or ranks per node
  int64_t timeout_ms = 600000;
};

/// Parses the command line into `cfg`. Returns -1 to go on, else the exit status (--help, a bad option).
int parse_options(int argc, char** argv, Config& cfg);

/// A dense size in bytes with an optional K/M/G suffix (powers of 2).
uint64_t parse_size(const std::string& s);

/// --scheme as the list of contenders, checked (raw MPI baselines only under mpirun).
std::vector<std::string> split_schemes(const std::string& s, bool mpi);

/// The SchemeOptions of every plan of the run.
zen::SchemeOptions scheme_options(const Config& cfg);

}  // namespace zen_perf
