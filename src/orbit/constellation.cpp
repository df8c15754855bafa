// Constellations (zen/orbit/scenario.hpp): Walker delta / star constellations, SGP4 states from mean
// elements at a start time, and the SGP4 scenario of an element-set file, whose satellites are
// grouped into planes and ordered into slots here (assign_planes).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <tuple>

#include "scenario_internal.hpp"
#include "zen/error.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/orbit/time.hpp"

namespace zen::orbit {

double minutes_since_epoch(const MeanElements& e, double start_jd, double start_frac, double t_s) {
  return ((start_jd - e.epoch_jd) + (start_frac - e.epoch_jd_frac)) * 1440.0 + t_s / 60.0;
}

SatState sgp4_state(const Sgp4& model, int sat, double start_jd, double start_frac, double t_s) {
  const MeanElements& e = model.elements();
  const double tsince = minutes_since_epoch(e, start_jd, start_frac, t_s);
  try {
    const Sgp4::State st = model.propagate_minutes(tsince);
    return SatState{st.r_km * 1e3, st.v_km_s * 1e3};
  } catch (const Sgp4Error& err) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " at t = %.3f s after the start (%s, %.3f min from its epoch %s)", t_s,
                  format_utc(start_jd, start_frac + t_s / 86400.0).c_str(), tsince, e.epoch_utc.c_str());
    ZEN_THROW(Result::InvalidArgument, "satellite " + std::to_string(sat) + " '" + e.name + "' (catalog " +
                                           std::to_string(e.catalog_number) + "): SGP4 error " +
                                           std::to_string(err.code()) + buf + ": " + err.what());
  }
}

namespace {

struct PlaneObs {
  Vec3 normal;  // unit r x v
  double sma_m = 0.0;
  CircularOrbit circ;
};

PlaneObs plane_obs(const Satellite& s, int k, double start_jd, double start_frac) {
  ZEN_ENFORCE(s.elements.has_value(), "satellite " + std::to_string(k) + " has no mean elements");
  const Sgp4 model(*s.elements);
  const SatState st = sgp4_state(model, k, start_jd, start_frac, 0.0);
  const Vec3 h = st.r_m.cross(st.v_m_s);
  ZEN_ENFORCE(h.norm() > 0.0, "satellite " + std::to_string(k) + " '" + s.elements->name +
                                  "': zero angular momentum at the start");
  PlaneObs o;
  o.normal = h.normalized();
  const double r = st.r_m.norm();
  const double inv_a = 2.0 / r - st.v_m_s.squaredNorm() / kEarthMu;
  o.sma_m = inv_a > 0.0 ? 1.0 / inv_a : 1e300;
  o.circ.altitude_m = r - kEarthRadius;
  o.circ.inclination_rad = std::acos(std::clamp(o.normal.z(), -1.0, 1.0));
  double raan = std::atan2(o.normal.x(), -o.normal.y());
  if (raan < 0.0) raan += kTwoPi;
  o.circ.raan_rad = raan;
  const Vec3 node(std::cos(raan), std::sin(raan), 0.0);
  double u = std::atan2(node.cross(st.r_m).dot(o.normal), node.dot(st.r_m));
  if (u < 0.0) u += kTwoPi;
  o.circ.arg_lat_rad = u;
  return o;
}

double normal_angle(const Vec3& a, const Vec3& b) { return std::atan2(a.cross(b).norm(), a.dot(b)); }

}  // namespace

void assign_planes(std::vector<Satellite>& sats, double start_jd, double start_frac, const PlaneClustering& th) {
  ZEN_ENFORCE(th.max_normal_angle_deg >= 0.0 && th.max_sma_diff_km >= 0.0,
              "plane clustering thresholds must be >= 0, got " + std::to_string(th.max_normal_angle_deg) + " deg, " +
                  std::to_string(th.max_sma_diff_km) + " km");
  const std::size_t n = sats.size();
  std::vector<PlaneObs> obs;
  obs.reserve(n);
  for (std::size_t k = 0; k < n; ++k) obs.push_back(plane_obs(sats[k], static_cast<int>(k), start_jd, start_frac));
  const double max_angle = th.max_normal_angle_deg * kDegToRad, max_da = th.max_sma_diff_km * 1e3;
  struct Cluster {
    Vec3 nsum = Vec3::Zero();
    double asum = 0.0;
    int count = 0;
    Vec3 normal() const { return nsum.normalized(); }
    double sma() const { return asum / count; }
  };
  auto fits = [&](const Cluster& c, const PlaneObs& o, double* angle) {
    *angle = normal_angle(c.normal(), o.normal);
    return *angle <= max_angle && std::abs(c.sma() - o.sma_m) <= max_da;
  };
  // Pass 1: leader clustering in file order against the running plane means.
  std::vector<Cluster> cl;
  std::vector<int> of(n, -1);
  for (std::size_t k = 0; k < n; ++k) {
    double ang = 0.0;
    for (std::size_t c = 0; c < cl.size() && of[k] < 0; ++c)
      if (fits(cl[c], obs[k], &ang)) of[k] = static_cast<int>(c);
    if (of[k] < 0) {
      of[k] = static_cast<int>(cl.size());
      cl.emplace_back();
    }
    Cluster& c = cl[static_cast<std::size_t>(of[k])];
    c.nsum += obs[k].normal, c.asum += obs[k].sma_m, ++c.count;
  }
  // Pass 2: each satellite to the closest plane mean within the thresholds (else a plane of its own).
  std::vector<int> of2(n, -1);
  int extra = 0;
  for (std::size_t k = 0; k < n; ++k) {
    double best = 1e300;
    for (std::size_t c = 0; c < cl.size(); ++c) {
      double ang = 0.0;
      if (fits(cl[c], obs[k], &ang) && ang < best) best = ang, of2[k] = static_cast<int>(c);
    }
    if (of2[k] < 0) of2[k] = static_cast<int>(cl.size()) + extra++;
  }
  // Number the planes by their first member in file order; slots by argument of latitude.
  std::map<int, int> plane_id;
  for (std::size_t k = 0; k < n; ++k)
    if (!plane_id.count(of2[k])) {
      const int id = static_cast<int>(plane_id.size());
      plane_id[of2[k]] = id;
    }
  std::map<int, std::vector<int>> members;
  for (std::size_t k = 0; k < n; ++k) members[plane_id[of2[k]]].push_back(static_cast<int>(k));
  for (auto& [p, ids] : members) {
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
      return obs[static_cast<std::size_t>(a)].circ.arg_lat_rad < obs[static_cast<std::size_t>(b)].circ.arg_lat_rad;
    });
    for (std::size_t j = 0; j < ids.size(); ++j) {
      Satellite& s = sats[static_cast<std::size_t>(ids[j])];
      s.plane = p;
      s.slot = static_cast<int>(j);
      s.orbit = obs[static_cast<std::size_t>(ids[j])].circ;
    }
  }
}

const char* walker_pattern_name(WalkerPattern p) noexcept {
  return p == WalkerPattern::Star ? "star" : "delta";
}

WalkerPattern parse_walker_pattern(const std::string& name) {
  if (name == "delta") return WalkerPattern::Delta;
  if (name == "star") return WalkerPattern::Star;
  ZEN_THROW(Result::InvalidArgument, "unknown Walker pattern '" + name + "' (expected delta or star)");
}

std::vector<Satellite> make_walker(const WalkerSpec& w) {
  ZEN_ENFORCE(w.total > 0, "Walker T must be positive, got " + std::to_string(w.total));
  ZEN_ENFORCE(w.planes > 0, "Walker P must be positive, got " + std::to_string(w.planes));
  ZEN_ENFORCE(w.total % w.planes == 0, "Walker T = " + std::to_string(w.total) +
                                           " is not a multiple of P = " + std::to_string(w.planes));
  ZEN_ENFORCE(w.phasing >= 0 && w.phasing < w.planes,
              "Walker F = " + std::to_string(w.phasing) + " out of [0, P-1 = " + std::to_string(w.planes - 1) + "]");
  ZEN_ENFORCE(w.altitude_m > 0.0, "Walker altitude must be positive, got " + std::to_string(w.altitude_m) + " m");
  const int S = w.total / w.planes;
  const double spread = w.pattern == WalkerPattern::Delta ? kTwoPi : kPi;
  std::vector<Satellite> sats;
  sats.reserve(static_cast<std::size_t>(w.total));
  for (int p = 0; p < w.planes; ++p) {
    for (int j = 0; j < S; ++j) {
      Satellite s;
      s.id = p * S + j;
      s.plane = p;
      s.slot = j;
      s.name = "P" + std::to_string(p) + "S" + std::to_string(j);
      s.orbit.altitude_m = w.altitude_m;
      s.orbit.inclination_rad = w.inclination_deg * kDegToRad;
      s.orbit.raan_rad = w.raan0_deg * kDegToRad + spread * p / w.planes;
      s.orbit.arg_lat_rad = w.u0_deg * kDegToRad +
                            kTwoPi * (static_cast<double>(j) / S + static_cast<double>(w.phasing) * p / w.total);
      sats.push_back(std::move(s));
    }
  }
  return sats;
}

std::pair<double, double> elements_start(const std::vector<MeanElements>& elements, const std::string& start_utc) {
  ZEN_ENFORCE(!elements.empty(), "SGP4 scenario: no element sets");
  if (!start_utc.empty()) return parse_utc(start_utc);
  // The earliest epoch (compare the split form: day first, then fraction).
  const MeanElements* first = &elements[0];
  for (const auto& e : elements)
    if ((e.epoch_jd - first->epoch_jd) + (e.epoch_jd_frac - first->epoch_jd_frac) < 0.0) first = &e;
  return {first->epoch_jd, first->epoch_jd_frac};
}

Scenario Scenario::from_elements(const std::vector<MeanElements>& elements, const std::string& start_utc,
                                 std::vector<ServerNode> servers, const PlaneClustering& thresholds) {
  ZEN_ENFORCE(!elements.empty(), "SGP4 scenario: no element sets");
  Scenario sc;
  sc.name = "sgp4";
  sc.propagator = Propagator::Sgp4;
  std::tie(sc.start_jd, sc.start_jd_frac) = elements_start(elements, start_utc);
  sc.epoch_utc = format_utc(sc.start_jd, sc.start_jd_frac);
  sc.gmst0_rad = gmst_rad(sc.start_jd + sc.start_jd_frac);  // UT1 = UTC
  for (std::size_t k = 0; k < elements.size(); ++k) {
    Satellite s;
    s.id = static_cast<int>(k);
    s.name = elements[k].name.empty() ? "sat" + std::to_string(k) : elements[k].name;
    s.elements = elements[k];
    sc.satellites.push_back(std::move(s));
  }
  assign_planes(sc.satellites, sc.start_jd, sc.start_jd_frac, thresholds);
  sc.planes = detail::count_planes(sc.satellites);
  sc.servers = servers.empty() ? std::vector<ServerNode>{detail::meo_server()} : std::move(servers);
  sc.validate();
  return sc;
}

Scenario Scenario::from_elements_file(const std::string& path, const std::string& start_utc,
                                      std::vector<ServerNode> servers, const PlaneClustering& thresholds) {
  Scenario sc = from_elements(read_elements(path), start_utc, std::move(servers), thresholds);
  sc.name = std::filesystem::path(path).stem().string();
  sc.elements_file = path;
  return sc;
}

}  // namespace zen::orbit
