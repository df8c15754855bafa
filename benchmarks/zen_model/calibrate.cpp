// zen_model: --calibrate and --predict, the model's time fitted to one run and predicting another.
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

namespace zen_model {

namespace {

// The calibrated time of a call: alpha per message round, beta per byte of the busiest rank, and a
// compute cost per row the busiest rank touches (per scheme).

/// Message rounds of a call at n ranks; 0 for a scheme the calibration does not know.
double rounds_of(const std::string& scheme, int n) {
  const double lg = std::ceil(std::log2(std::max(1, n)));
  if (scheme == "balanced" || scheme == "sparse_ps") return 3.0 * (n - 1) + lg;
  if (scheme == "allgather" || scheme == "mpi_allgatherv") return (n - 1) + lg;
  if (scheme == "dense_native" || scheme == "mpi_allreduce" || scheme == "dense") return 2.0 * (n - 1);
  return 0.0;
}

/// Rows touched on the busiest rank, from the row's density (k = density * size per rank) and gamma
/// (the union K = gamma * k).
double work_of(const std::string& scheme, int n, double density, double gamma, double size) {
  const double k = density * size, K = gamma * k;
  if (scheme == "allgather" || scheme == "mpi_allgatherv") return k + n * k;
  if (scheme == "balanced" || scheme == "sparse_ps") return 2 * k + K;
  return k + size;
}

struct Calibration {
  int n = 0;
  double alpha = 0, beta = 0;
  std::map<std::string, double> per_row;  ///< seconds per row touched, per scheme
};

// ---------------------------------------------------------------------------------------------
// --calibrate: alpha and beta from the dense rows of a zen_perf run, then a compute cost per row.
}  // namespace

int run_calibrate(const std::string& perf_json, const std::string& compute_from, const std::string& save) {
  std::ifstream f(perf_json);
  ZEN_ENFORCE(f.good(), "--calibrate: cannot read '" + perf_json + "'");
  const json j = json::parse(f);
  const int n = j.at("ranks").get<int>();
  ZEN_ENFORCE(n > 1, "--calibrate: needs a run with at least 2 ranks");
  const json& cf = j.at("config");
  const bool sparse_out = cf.value("output", std::string("dense")) == "sparse";
  struct Pt {
    std::string scheme;
    double bytes, steps, seconds, density, gamma, size;
  };
  std::vector<Pt> pts;
  const std::string dense_name = [&] {
    for (const auto& r : j.at("rows"))
      if (r.at("scheme") == "mpi_allreduce") return std::string("mpi_allreduce");
    return std::string("dense_native");
  }();
  auto read_pts = [](const json& run) {
    std::vector<Pt> v;
    for (const auto& r : run.at("rows")) {
      Pt p;
      p.scheme = r.at("scheme").get<std::string>();
      p.bytes = static_cast<double>(std::max(r.at("sent_B").get<uint64_t>(), r.at("recv_B").get<uint64_t>()));
      p.seconds = r.at("time_us").get<double>() * 1e-6;
      p.density = r.at("density").get<double>();
      p.gamma = r.value("gamma", 1.0);
      p.size = r.at("count").get<double>();
      v.push_back(p);
    }
    return v;
  };
  pts = read_pts(j);
  // Dense: t = alpha * 2(n-1) + beta * bytes, least squares on relative errors (weights 1/t^2)
  // so that small sizes count as much as large ones.
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  int m = 0;
  const double rounds_dense = 2.0 * (n - 1);
  for (const auto& p : pts)
    if (p.scheme == dense_name) {
      const double w = 1.0 / (p.seconds * p.seconds), x1 = rounds_dense, x2 = p.bytes;
      s11 += w * x1 * x1, s12 += w * x1 * x2, s22 += w * x2 * x2, s1y += w * x1 * p.seconds, s2y += w * x2 * p.seconds;
      ++m;
    }
  ZEN_ENFORCE(m >= 2, "--calibrate: needs " + dense_name + " at 2 or more sizes (zen_perf -b ... -e ... -f ...)");
  const double det = s11 * s22 - s12 * s12;
  double alpha = det != 0 ? (s1y * s22 - s2y * s12) / det : 0.0;
  double beta = det != 0 ? (s11 * s2y - s12 * s1y) / det : s2y / s22;
  if (alpha < 0) {  // no latency term fits: bandwidth only
    alpha = 0;
    beta = s2y / s22;
  }
  std::printf("# calibration from %s (%s at %d sizes, n=%d; weighted least squares on relative error):\n"
              "#   alpha = %.2f us per round (ring: %.0f rounds), beta = %.3g s/B (%.2f GB/s per rank)\n",
              perf_json.c_str(), dense_name.c_str(), m, n, alpha * 1e6, rounds_dense, beta, beta > 0 ? 1e-9 / beta : 0.0);
  // Per scheme: the residual per row touched, least squares through the origin; on the rows of
  // --compute-from when given (e.g. the trace run itself: rows of D values, its overlap), else here.
  std::vector<Pt> cpts = pts;
  int cn = n;
  if (!compute_from.empty()) {
    std::ifstream fc(compute_from);
    ZEN_ENFORCE(fc.good(), "--compute-from: cannot read '" + compute_from + "'");
    const json jc = json::parse(fc);
    cpts = read_pts(jc);
    cn = jc.at("ranks").get<int>();
    std::printf("# compute per row from %s (n=%d)\n", compute_from.c_str(), cn);
  }
  Calibration cal;
  cal.n = cn, cal.alpha = alpha, cal.beta = beta;
  std::printf("%16s %14s %12s %12s %12s %8s\n", "scheme", "ns/row", "count", "measured_us", "model_us", "error");
  for (const std::string scheme : {"allgather", "balanced", "dense", "dense_native", "mpi_allgatherv", "mpi_allreduce",
                                   "sparse_ps"}) {
    const double steps = rounds_of(scheme, cn);
    double num = 0, den = 0;
    std::vector<const Pt*> mine;
    for (const auto& p : cpts)
      if (p.scheme == scheme) mine.push_back(&p);
    if (mine.empty()) continue;
    auto work = [&](const Pt& p) { return work_of(scheme, cn, p.density, p.gamma, p.size); };
    for (const Pt* p : mine) {  // relative-error weights, as above
      const double rest = p->seconds - alpha * steps - beta * p->bytes, w = 1.0 / (p->seconds * p->seconds);
      num += w * rest * work(*p);
      den += w * work(*p) * work(*p);
    }
    const double c = den > 0 ? std::max(0.0, num / den) : 0.0;
    cal.per_row[scheme] = c;
    for (const Pt* p : mine) {
      const double model_s = alpha * steps + beta * p->bytes + c * work(*p);
      std::printf("%16s %14.2f %12.0f %12.1f %12.1f %+7.0f%%\n", scheme.c_str(), c * 1e9, p->size, p->seconds * 1e6,
                  model_s * 1e6, 100.0 * (model_s / p->seconds - 1.0));
    }
  }
  (void)sparse_out;
  if (!save.empty()) {
    json out = {{"from", perf_json}, {"ranks", cal.n}, {"alpha_s", cal.alpha}, {"beta_s_per_B", cal.beta}};
    for (const auto& [scheme, c] : cal.per_row) out["s_per_row"][scheme] = c;
    std::ofstream(save) << out.dump(2) << "\n";
    std::printf("# wrote %s\n", save.c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// --predict: a zen_perf trace run at another rank count against the calibration's time. Bytes are
// the model's own (exact, --check); for the raw MPI baselines, which the model does not cover, the
// run's measured bytes.

int run_predict(const std::vector<Trace>& traces, const std::string& perf_json, const std::string& cal_json,
                double within) {
  std::ifstream fc(cal_json);
  ZEN_ENFORCE(fc.good(), "--calibration: cannot read '" + cal_json + "'");
  const json c = json::parse(fc);
  Calibration cal;
  cal.n = c.at("ranks").get<int>();
  cal.alpha = c.at("alpha_s").get<double>();
  cal.beta = c.at("beta_s_per_B").get<double>();
  for (const auto& [k, v] : c.at("s_per_row").items()) cal.per_row[k] = v.get<double>();
  std::ifstream f(perf_json);
  ZEN_ENFORCE(f.good(), "--predict: cannot read '" + perf_json + "'");
  const json j = json::parse(f);
  const RunSettings rs = settings_of(j);
  std::printf("# zen_model --predict %s with %s (calibrated at n=%d: alpha %.2f us per round, %.2f GB/s): n=%d output=%s\n",
              perf_json.c_str(), cal_json.c_str(), cal.n, cal.alpha * 1e6, cal.beta > 0 ? 1e-9 / cal.beta : 0.0, rs.n,
              rs.sparse_out ? "sparse" : "dense");
  std::printf("%16s %8s %12s %12s %12s %12s %12s %8s %7s\n", "scheme", "bytes", "busiest_B", "alpha_us", "beta_us",
              "compute_us", "model_us", "measured_us", "error");
  int compared = 0, inside = 0;
  for (const auto& row : j.at("rows")) {
    const std::string scheme = row.at("scheme").get<std::string>();
    const auto cit = cal.per_row.find(scheme);
    if (cit == cal.per_row.end() || rounds_of(scheme, rs.n) == 0) continue;
    const std::string label = row.value("trace", std::string());
    const Trace* tr = trace_of(traces, label);
    if (!tr) continue;
    ZEN_ENFORCE(tr->meta.ranks >= rs.n, "--predict: the trace has fewer ranks than the run");
    uint64_t bytes = 0;
    const bool modelled = model::covers(scheme);
    if (modelled) {
      const auto [ms, mr] = zen_perf_bytes(*tr, rs, scheme);
      bytes = std::max(ms, mr);
    } else {
      bytes = std::max(row.at("sent_B").get<uint64_t>(), row.at("recv_B").get<uint64_t>());
    }
    const double a = cal.alpha * rounds_of(scheme, rs.n), b = cal.beta * static_cast<double>(bytes),
                 w = cit->second * work_of(scheme, rs.n, row.at("density").get<double>(), row.value("gamma", 1.0),
                                           row.at("count").get<double>());
    const double model_us = (a + b + w) * 1e6, measured_us = row.at("time_us").get<double>();
    const double err = model_us / measured_us - 1.0;
    ++compared;
    inside += std::abs(err) <= within ? 1 : 0;
    std::printf("%16s %8s %12llu %12.1f %12.1f %12.1f %12.1f %12.1f %+6.0f%%\n", scheme.c_str(), modelled ? "model" : "measured",
                static_cast<unsigned long long>(bytes), a * 1e6, b * 1e6, w * 1e6, model_us, measured_us, 100 * err);
  }
  ZEN_ENFORCE(compared > 0, "--predict: no row of '" + perf_json + "' is a calibrated scheme on the given trace(s)");
  std::printf("# %d of %d rows within %.0f %%\n", inside, compared, 100 * within);
  return 0;
}

}  // namespace zen_model
