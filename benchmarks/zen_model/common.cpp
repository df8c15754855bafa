// zen_model: the shared parts (common.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"
#include "zen/error.hpp"
#include "zen/trace/stats.hpp"

namespace fs = std::filesystem;

namespace zen_model {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

Trace load(const std::string& dir) {
  Trace tr;
  tr.dir = dir;
  tr.meta = trace::read_meta(dir);
  tr.sets.resize(static_cast<size_t>(tr.meta.iterations));
  for (int t = 0; t < tr.meta.iterations; ++t)
    for (int r = 0; r < tr.meta.ranks; ++r) {
      auto v = trace::read_rank_indices(dir, tr.meta, r, t);
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      tr.sets[static_cast<size_t>(t)].push_back(std::move(v));
    }
  return tr;
}

RunSettings settings_of(const json& run) {
  const json& cf = run.at("config");
  RunSettings rs;
  rs.n = run.at("ranks").get<int>();
  rs.opt.seed = cf.at("seed").get<uint64_t>();
  rs.opt.pull = parse_index_encoding(cf.value("pull", std::string("auto")));
  rs.opt.push = parse_index_encoding(cf.value("push", std::string("auto")));
  rs.opt.block_size = cf.value("block_size", 256u);
  rs.opt.sparcml_dense_switch = cf.value("sparcml_switch", 0.0);
  rs.sparse_out = cf.value("output", std::string("dense")) == "sparse";
  rs.warmup = cf.at("warmup").get<int>();
  rs.iters = cf.at("iters").get<int>();
  return rs;
}

const Trace* trace_of(const std::vector<Trace>& traces, const std::string& label) {
  const Trace* tr = nullptr;
  for (const auto& t : traces)
    if (t.dir == label || fs::path(t.dir).filename() == fs::path(label).filename()) tr = &t;
  return tr;
}

model::Problem problem_of(const Trace& tr, const RunSettings& rs) {
  const TensorSpec spec{static_cast<uint64_t>(tr.meta.N), static_cast<uint32_t>(tr.meta.row_width), tr.meta.dtype};
  return model::Problem::of(spec, rs.n, rs.opt, rs.sparse_out);
}

std::pair<uint64_t, uint64_t> zen_perf_bytes(const Trace& tr, const RunSettings& rs, const std::string& scheme) {
  const model::Problem p = problem_of(tr, rs);
  const auto T = tr.sets.size();
  const auto un = static_cast<size_t>(rs.n);
  std::vector<model::Traffic> per_t(T);
  std::vector<bool> have(T, false);
  std::vector<uint64_t> sent(un, 0), recv(un, 0);
  uint64_t calls = 0;
  for (int k = rs.warmup; k < rs.warmup + rs.iters; ++k) {
    const size_t t = static_cast<size_t>(k) % T;
    if (!have[t]) {
      std::vector<std::vector<int64_t>> rows(tr.sets[t].begin(), tr.sets[t].begin() + rs.n);
      per_t[t] = model::traffic(scheme, p, model::count_exact(p, rows));
      have[t] = true;
    }
    for (size_t r = 0; r < un; ++r) {
      sent[r] += per_t[t].sent[r];
      recv[r] += per_t[t].recv[r];
    }
    ++calls;
  }
  uint64_t ms = 0, mr = 0;
  for (size_t r = 0; r < un; ++r) {
    ms = std::max(ms, sent[r] / std::max<uint64_t>(1, calls));
    mr = std::max(mr, recv[r] / std::max<uint64_t>(1, calls));
  }
  return {ms, mr};
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  for (const auto& x : split(s)) v.push_back(std::stoi(x));
  return v;
}
std::vector<double> parse_doubles(const std::string& s) {
  std::vector<double> v;
  for (const auto& x : split(s)) v.push_back(std::stod(x));
  return v;
}

}  // namespace zen_model
