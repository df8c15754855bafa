#include "zen/orbit/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "zen/error.hpp"
#include "zen/orbit/time.hpp"

namespace zen::orbit {

using json = nlohmann::json;

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

ServerNode ServerNode::satellite(std::string name, const CircularOrbit& orbit) {
  ServerNode n;
  n.kind = Kind::Satellite;
  n.name = std::move(name);
  n.orbit = orbit;
  return n;
}

ServerNode ServerNode::ground(const GroundStation& gs) {
  ServerNode n;
  n.kind = Kind::Ground;
  n.name = gs.name;
  n.station = gs;
  return n;
}

namespace {

WalkerSpec reference_walker(bool star) {
  WalkerSpec w;
  w.pattern = star ? WalkerPattern::Star : WalkerPattern::Delta;
  w.inclination_deg = star ? 85.0 : 60.0;
  w.total = 40;
  w.planes = 5;
  w.phasing = 1;
  w.altitude_m = 2000e3;
  return w;
}

ServerNode meo_server() {
  CircularOrbit o;
  o.altitude_m = 20000e3;
  return ServerNode::satellite("meo", o);
}

int count_planes(const std::vector<Satellite>& sats) {
  int p = 0;
  for (const auto& s : sats) p = std::max(p, s.plane + 1);
  return p;
}

const std::set<std::string> kTopKeys = {"name", "base", "propagator", "epoch_utc", "gmst0_deg",
                                        "elevation_mask_deg", "atmosphere_margin_km", "walker",
                                        "satellites", "servers", "links", "tle", "start_utc"};
const std::set<std::string> kLinksKeys = {"isl", "server"};
const std::set<std::string> kLinkKeys = {"preset",      "frequency_ghz", "bandwidth_mhz", "tx_power_dbw",
                                         "gain_tx_dbi", "gain_rx_dbi",   "noise_temp_k",  "losses_db",
                                         "rate",        "min_snr_db",    "rolloff"};
const std::set<std::string> kWalkerKeys = {"pattern", "inclination_deg", "total", "planes", "phasing",
                                           "altitude_km", "altitude_m", "raan0_deg", "u0_deg"};
const std::set<std::string> kSatelliteKeys = {"plane", "slot", "name", "altitude_km", "altitude_m",
                                              "inclination_deg", "raan_deg", "arg_lat_deg"};
const std::set<std::string> kSatServerKeys = {"type", "name", "altitude_km", "altitude_m",
                                              "inclination_deg", "raan_deg", "arg_lat_deg"};
const std::set<std::string> kGroundKeys = {"type", "name", "lat_deg", "lon_deg", "alt_m"};

// Every key of object j must be in `allowed`; `where` names the level (and entry) in the error.
void only_keys(const json& j, const std::set<std::string>& allowed, const std::string& where) {
  ZEN_ENFORCE(j.is_object(), where + " must be a JSON object, got " + j.dump().substr(0, 80));
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!allowed.count(it.key())) {
      std::string all;
      for (const auto& k : allowed) all += (all.empty() ? "" : ", ") + k;
      ZEN_THROW(Result::InvalidArgument, where + ": unknown field '" + it.key() + "' (known: " + all + ")");
    }
}

double get_num(const json& j, const char* key, double dflt, const std::string& where) {
  if (!j.contains(key)) return dflt;
  ZEN_ENFORCE(j.at(key).is_number(), where + ": field '" + key + "' must be a number, got " + j.at(key).dump());
  return j.at(key).get<double>();
}

double require_num(const json& j, const char* key, const std::string& where) {
  ZEN_ENFORCE(j.contains(key), where + ": missing field '" + key + "'");
  return get_num(j, key, 0.0, where);
}

// An integer field: a JSON number that is whole and within [lo, hi] (checked before any cast).
int get_int(const json& j, const char* key, double dflt, double lo, double hi, const std::string& where, bool required) {
  ZEN_ENFORCE(!required || j.contains(key), where + ": missing field '" + key + "'");
  const double v = get_num(j, key, dflt, where);
  ZEN_ENFORCE(std::isfinite(v) && v == std::floor(v) && v >= lo && v <= hi,
              where + ": field '" + key + "' must be a whole number in [" + std::to_string(static_cast<long long>(lo)) +
                  ", " + std::to_string(static_cast<long long>(hi)) + "], got " + j.at(key).dump());
  return static_cast<int>(v);
}

// altitude from altitude_km or altitude_m
double get_altitude(const json& j, const std::string& where, bool required) {
  if (j.contains("altitude_km")) return get_num(j, "altitude_km", 0.0, where) * 1e3;
  if (j.contains("altitude_m")) return get_num(j, "altitude_m", 0.0, where);
  ZEN_ENFORCE(!required, where + ": missing field 'altitude_km' (or 'altitude_m')");
  return 0.0;
}

// A link budget: "preset" (ka or s, default ka) gives the values not listed.
LinkPreset parse_link(const json& j, const std::string& where) {
  only_keys(j, kLinkKeys, where);
  LinkPreset p = LinkPreset::named(j.value("preset", std::string("ka")));
  p.name = where.substr(where.rfind(' ') + 1);
  p.frequency_hz = get_num(j, "frequency_ghz", p.frequency_hz / 1e9, where) * 1e9;
  p.bandwidth_hz = get_num(j, "bandwidth_mhz", p.bandwidth_hz / 1e6, where) * 1e6;
  p.tx_power_w = from_db(get_num(j, "tx_power_dbw", to_db(p.tx_power_w), where));
  p.gain_tx = from_db(get_num(j, "gain_tx_dbi", to_db(p.gain_tx), where));
  p.gain_rx = from_db(get_num(j, "gain_rx_dbi", to_db(p.gain_rx), where));
  p.noise_temp_k = get_num(j, "noise_temp_k", p.noise_temp_k, where);
  p.losses_db = get_num(j, "losses_db", p.losses_db, where);
  if (j.contains("rate")) p.rate_model = parse_rate_model(j.at("rate").get<std::string>());
  p.min_snr_db = get_num(j, "min_snr_db", p.min_snr_db, where);
  p.rolloff = get_num(j, "rolloff", p.rolloff, where);
  ZEN_ENFORCE(p.frequency_hz > 0 && p.bandwidth_hz > 0 && p.tx_power_w > 0 && p.noise_temp_k > 0,
              where + ": frequency, bandwidth, transmit power and noise temperature must be positive");
  ZEN_ENFORCE(p.rolloff >= 0 && p.rolloff <= 1, where + ": rolloff must be in [0, 1]");
  return p;
}

json link_json(const LinkPreset& p) {
  json j{{"frequency_ghz", p.frequency_hz / 1e9}, {"bandwidth_mhz", p.bandwidth_hz / 1e6},
         {"tx_power_dbw", to_db(p.tx_power_w)},   {"gain_tx_dbi", to_db(p.gain_tx)},
         {"gain_rx_dbi", to_db(p.gain_rx)},       {"noise_temp_k", p.noise_temp_k},
         {"losses_db", p.losses_db},              {"rate", rate_model_name(p.rate_model)}};
  if (p.min_snr_db > -1e299) j["min_snr_db"] = p.min_snr_db;
  if (p.rate_model == RateModel::DvbS2) j["rolloff"] = p.rolloff;
  return j;
}

CircularOrbit parse_orbit(const json& j, const std::string& where) {
  CircularOrbit o;
  o.altitude_m = get_altitude(j, where, true);
  o.inclination_rad = get_num(j, "inclination_deg", 0.0, where) * kDegToRad;
  o.raan_rad = get_num(j, "raan_deg", 0.0, where) * kDegToRad;
  o.arg_lat_rad = get_num(j, "arg_lat_deg", 0.0, where) * kDegToRad;
  ZEN_ENFORCE(o.altitude_m > 0.0, where + ": altitude must be positive, got " + std::to_string(o.altitude_m) + " m");
  return o;
}

json orbit_json(const CircularOrbit& o) {
  return json{{"altitude_m", o.altitude_m},
              {"inclination_deg", o.inclination_rad * kRadToDeg},
              {"raan_deg", o.raan_rad * kRadToDeg},
              {"arg_lat_deg", o.arg_lat_rad * kRadToDeg}};
}

}  // namespace

ServerNode parse_server(const std::string& spec) {
  if (spec == "meo") return meo_server();
  if (spec == "bremen") return ServerNode::ground(GroundStation{"bremen", 53.0, 8.8, 0.0});
  if (spec == "northpole") return ServerNode::ground(GroundStation{"northpole", 90.0, 0.0, 0.0});
  GroundStation gs;
  std::string body = spec;
  if (const auto eq = spec.find('='); eq != std::string::npos) {
    gs.name = spec.substr(0, eq);
    body = spec.substr(eq + 1);
  }
  std::vector<double> v;
  size_t p = 0;
  while (p <= body.size()) {
    const size_t q = std::min(body.find(',', p), body.size());
    const std::string x = body.substr(p, q - p);
    size_t used = 0;
    double d = 0;
    try {
      d = std::stod(x, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ZEN_ENFORCE(!x.empty() && used == x.size() && std::isfinite(d),
                "server '" + spec + "': expected meo, bremen, northpole or [NAME=]LAT,LON[,ALT_M] in degrees and metres");
    v.push_back(d);
    p = q + 1;
  }
  ZEN_ENFORCE(v.size() == 2 || v.size() == 3, "server '" + spec + "': expected LAT,LON or LAT,LON,ALT_M");
  ZEN_ENFORCE(v[0] >= -90 && v[0] <= 90 && v[1] >= -180 && v[1] <= 360,
              "server '" + spec + "': latitude must be in [-90, 90] and longitude in [-180, 360] degrees");
  gs.lat_deg = v[0];
  gs.lon_deg = v[1];
  gs.alt_m = v.size() == 3 ? v[2] : 0.0;
  if (gs.name.empty()) gs.name = "gs(" + body + ")";
  return ServerNode::ground(gs);
}

std::vector<ServerNode> read_ground_stations(const std::string& path) {
  std::ifstream f(path);
  ZEN_CHECK_CODE(f.good(), Result::SystemError, "cannot read ground stations from '" + path + "'");
  std::vector<ServerNode> out;
  std::set<std::string> names;
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto comma = line.find(',');
    ZEN_ENFORCE(comma != std::string::npos && comma > 0,
                path + ":" + std::to_string(no) + ": expected name,lat_deg,lon_deg[,alt_m], got '" + line + "'");
    const std::string name = line.substr(0, comma);
    ServerNode n;
    try {
      n = parse_server(name + "=" + line.substr(comma + 1));
    } catch (const Error& e) {
      ZEN_THROW(Result::InvalidArgument, path + ":" + std::to_string(no) + ": " + e.what());
    }
    ZEN_ENFORCE(names.insert(name).second, path + ":" + std::to_string(no) + ": station '" + name + "' listed twice");
    out.push_back(std::move(n));
  }
  ZEN_ENFORCE(!out.empty(), "'" + path + "' lists no ground station");
  return out;
}

std::vector<std::string> Scenario::builtin_names() {
  return {"reference", "reference-star", "bremen", "northpole", "starlink", "razmi2022"};
}

Scenario Scenario::named(const std::string& name) {
  Scenario sc;
  sc.name = name;
  if (name == "razmi2022") {
    // Razmi et al., ICC 2022 (arXiv 2111.12769), as its authors' simulator sets it up: the reference
    // constellation and MEO server at the simulator's epoch, Ka links on both ISLs and server links.
    sc.walker = reference_walker(false);
    sc.satellites = make_walker(*sc.walker);
    sc.servers.push_back(meo_server());
    sc.isl_link = LinkPreset::ka();
    sc.server_link = LinkPreset::ka();
  } else if (name == "reference" || name == "reference-star" || name == "bremen" || name == "northpole") {
    sc.walker = reference_walker(name == "reference-star");
    sc.satellites = make_walker(*sc.walker);
    if (name == "bremen") {
      sc.servers.push_back(ServerNode::ground(GroundStation{"bremen", 53.0, 8.8, 0.0}));
    } else if (name == "northpole") {
      sc.servers.push_back(ServerNode::ground(GroundStation{"northpole", 90.0, 0.0, 0.0}));
    } else {
      sc.servers.push_back(meo_server());
    }
  } else if (name == "starlink") {
    WalkerSpec w;
    w.pattern = WalkerPattern::Delta;
    w.inclination_deg = 53.0;
    w.total = 1584;
    w.planes = 72;
    w.phasing = 1;
    w.altitude_m = 550e3;
    sc.walker = w;
    sc.satellites = make_walker(w);
    sc.servers.push_back(ServerNode::ground(GroundStation{"bremen", 53.0, 8.8, 0.0}));
  } else {
    std::string all;
    for (const auto& n : builtin_names()) all += (all.empty() ? "" : ", ") + n;
    ZEN_THROW(Result::InvalidArgument, "unknown scenario '" + name + "' (built-in: " + all + ")");
  }
  sc.planes = count_planes(sc.satellites);
  sc.validate();
  return sc;
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
  sc.planes = count_planes(sc.satellites);
  sc.servers = servers.empty() ? std::vector<ServerNode>{meo_server()} : std::move(servers);
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

Scenario Scenario::from_json_text(const std::string& text, const std::string& base_dir) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    ZEN_THROW(Result::InvalidArgument, std::string("scenario JSON does not parse: ") + e.what());
  }
  ZEN_ENFORCE(j.is_object(), "scenario JSON must be an object, got " + j.dump().substr(0, 80));
  only_keys(j, kTopKeys, "scenario JSON");

  Scenario sc;
  try {
    if (j.contains("base")) sc = named(j.at("base").get<std::string>());
    sc.name = j.value("name", sc.name.empty() ? std::string("custom") : sc.name);
    if (j.contains("propagator")) sc.propagator = parse_propagator(j.at("propagator").get<std::string>());
    if (j.contains("epoch_utc")) sc.epoch_utc = j.at("epoch_utc").get<std::string>();
    sc.gmst0_rad = get_num(j, "gmst0_deg", sc.gmst0_rad * kRadToDeg, "scenario") * kDegToRad;
    sc.elevation_mask_deg = get_num(j, "elevation_mask_deg", sc.elevation_mask_deg, "scenario");
    sc.atmosphere_margin_m = get_num(j, "atmosphere_margin_km", sc.atmosphere_margin_m / 1e3, "scenario") * 1e3;

    if (j.contains("tle")) {
      // SGP4 constellation from a TLE / OMM file (path relative to the JSON file).
      ZEN_ENFORCE(!j.contains("walker") && !j.contains("satellites"),
                  "scenario JSON: 'tle' replaces the constellation; drop 'walker' / 'satellites'");
      ZEN_ENFORCE(!j.contains("gmst0_deg") && !j.contains("epoch_utc"),
                  "scenario JSON: with 'tle' the start ('start_utc', default the earliest epoch) sets the epoch and "
                  "GMST; drop 'gmst0_deg' / 'epoch_utc'");
      ZEN_ENFORCE(sc.propagator == Propagator::Sgp4 || !j.contains("propagator"),
                  "scenario JSON: 'tle' needs propagator sgp4, got '" + std::string(propagator_name(sc.propagator)) + "'");
      std::filesystem::path path = j.at("tle").get<std::string>();
      if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
      const std::string start = j.contains("start_utc") ? j.at("start_utc").get<std::string>() : std::string();
      const Scenario e = from_elements_file(path.string(), start);
      sc.satellites = e.satellites;
      sc.propagator = Propagator::Sgp4;
      sc.start_jd = e.start_jd;
      sc.start_jd_frac = e.start_jd_frac;
      sc.epoch_utc = e.epoch_utc;
      sc.gmst0_rad = e.gmst0_rad;
      sc.elements_file = e.elements_file;
      sc.walker.reset();
      if (sc.servers.empty()) sc.servers = e.servers;
      if (!j.contains("name")) sc.name = e.name;
    }
    ZEN_ENFORCE(!j.contains("start_utc") || j.contains("tle"), "scenario JSON: 'start_utc' needs 'tle'");
    if (j.contains("walker") || j.contains("satellites")) sc.satellites.clear();
    const std::optional<WalkerSpec> base_walker = sc.walker;
    sc.walker.reset();
    if (j.contains("walker")) {
      // Fields not given come from the base's Walker spec (required when there is none).
      const json& w = j.at("walker");
      only_keys(w, kWalkerKeys, "scenario JSON walker");
      const bool have = base_walker.has_value();
      WalkerSpec spec = have ? *base_walker : WalkerSpec{};
      if (w.contains("pattern")) spec.pattern = parse_walker_pattern(w.at("pattern").get<std::string>());
      spec.inclination_deg = have ? get_num(w, "inclination_deg", spec.inclination_deg, "walker")
                                  : require_num(w, "inclination_deg", "walker");
      spec.total = get_int(w, "total", spec.total, 1, 1e6, "walker", !have);
      spec.planes = get_int(w, "planes", spec.planes, 1, 1e6, "walker", !have);
      spec.phasing = get_int(w, "phasing", spec.phasing, 0, 1e6, "walker", false);
      if (w.contains("altitude_km") || w.contains("altitude_m") || !have) spec.altitude_m = get_altitude(w, "walker", true);
      spec.raan0_deg = get_num(w, "raan0_deg", spec.raan0_deg, "walker");
      spec.u0_deg = get_num(w, "u0_deg", spec.u0_deg, "walker");
      sc.satellites = make_walker(spec);
      sc.walker = spec;
    } else if (!j.contains("satellites") && !j.contains("tle")) {
      sc.walker = base_walker;  // the base's constellation stays
    }
    if (j.contains("satellites")) {
      ZEN_ENFORCE(j.at("satellites").is_array(), "scenario JSON: 'satellites' must be an array");
      for (const json& s : j.at("satellites")) {
        Satellite sat;
        only_keys(s, kSatelliteKeys, "scenario JSON satellite " + std::to_string(sc.satellites.size()));
        sat.id = static_cast<int>(sc.satellites.size());
        const std::string where = "satellite " + std::to_string(sat.id);
        sat.plane = get_int(s, "plane", 0, 0, 1e6, where, true);
        sat.slot = get_int(s, "slot", 0, 0, 1e6, where, true);
        sat.name = s.value("name", "sat" + std::to_string(sat.id));
        sat.orbit = parse_orbit(s, where);
        sc.satellites.push_back(std::move(sat));
      }
    }
    if (j.contains("servers")) {
      ZEN_ENFORCE(j.at("servers").is_array(), "scenario JSON: 'servers' must be an array");
      sc.servers.clear();
      for (const json& s : j.at("servers")) {
        const std::string where = "server " + std::to_string(sc.servers.size());
        ZEN_ENFORCE(s.is_object(), "scenario JSON " + where + " must be a JSON object");
        const std::string type = s.value("type", std::string());
        if (type == "satellite" || type == "ground")
          only_keys(s, type == "satellite" ? kSatServerKeys : kGroundKeys, "scenario JSON " + where + " (" + type + ")");
        if (type == "satellite") {
          sc.servers.push_back(ServerNode::satellite(s.value("name", "server" + std::to_string(sc.servers.size())),
                                                     parse_orbit(s, where)));
        } else if (type == "ground") {
          GroundStation gs;
          gs.name = s.value("name", "gs" + std::to_string(sc.servers.size()));
          gs.lat_deg = require_num(s, "lat_deg", where);
          gs.lon_deg = require_num(s, "lon_deg", where);
          gs.alt_m = get_num(s, "alt_m", 0.0, where);
          sc.servers.push_back(ServerNode::ground(gs));
        } else {
          ZEN_THROW(Result::InvalidArgument, where + ": type '" + type + "' is neither satellite nor ground");
        }
      }
    }
    if (j.contains("links")) {
      const json& l = j.at("links");
      only_keys(l, kLinksKeys, "scenario JSON links");
      if (l.contains("isl")) sc.isl_link = parse_link(l.at("isl"), "scenario JSON link isl");
      if (l.contains("server")) sc.server_link = parse_link(l.at("server"), "scenario JSON link server");
    }
  } catch (const json::exception& e) {
    ZEN_THROW(Result::InvalidArgument, std::string("scenario JSON: bad field type: ") + e.what());
  }
  sc.planes = count_planes(sc.satellites);
  sc.validate();
  return sc;
}

Scenario Scenario::from_file(const std::string& path) {
  std::ifstream in(path);
  ZEN_CHECK_CODE(in.good(), Result::SystemError, "cannot open scenario file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), std::filesystem::path(path).parent_path().string());
}

std::string Scenario::to_json_text() const {
  json j;
  j["name"] = name;
  j["propagator"] = propagator_name(propagator);
  if (propagator == Propagator::Sgp4) {
    // The elements stay in their file; the start fixes the epoch and GMST.
    ZEN_ENFORCE(!elements_file.empty(), "to_json_text: SGP4 scenario '" + name +
                                            "' was not read from a file (JSON refers to the elements by path)");
    j["tle"] = std::filesystem::absolute(elements_file).string();
    j["start_utc"] = format_utc(start_jd, start_jd_frac);
  } else {
    j["epoch_utc"] = epoch_utc;
    j["gmst0_deg"] = gmst0_rad * kRadToDeg;
  }
  j["elevation_mask_deg"] = elevation_mask_deg;
  j["atmosphere_margin_km"] = atmosphere_margin_m / 1e3;
  // A Walker constellation as its editable block; only the satellites after it are listed.
  size_t first_extra = 0;
  if (walker && satellites.size() >= static_cast<size_t>(walker->total)) {
    j["walker"] = json{{"pattern", walker_pattern_name(walker->pattern)},
                       {"inclination_deg", walker->inclination_deg},
                       {"total", walker->total},
                       {"planes", walker->planes},
                       {"phasing", walker->phasing},
                       {"altitude_km", walker->altitude_m / 1e3},
                       {"raan0_deg", walker->raan0_deg},
                       {"u0_deg", walker->u0_deg}};
    first_extra = static_cast<size_t>(walker->total);
  }
  json sats = json::array();
  if (propagator == Propagator::Sgp4) first_extra = satellites.size();
  for (size_t k = first_extra; k < satellites.size(); ++k) {
    const Satellite& s = satellites[k];
    json o = orbit_json(s.orbit);
    o["plane"] = s.plane;
    o["slot"] = s.slot;
    o["name"] = s.name;
    sats.push_back(o);
  }
  if ((!j.contains("walker") && !j.contains("tle")) || !sats.empty()) j["satellites"] = sats;
  json servs = json::array();
  for (const auto& s : servers) {
    if (s.kind == ServerNode::Kind::Satellite) {
      json o = orbit_json(s.orbit);
      o["type"] = "satellite";
      o["name"] = s.name;
      servs.push_back(o);
    } else {
      servs.push_back(json{{"type", "ground"}, {"name", s.name}, {"lat_deg", s.station.lat_deg},
                           {"lon_deg", s.station.lon_deg}, {"alt_m", s.station.alt_m}});
    }
  }
  j["servers"] = servs;
  if (isl_link || server_link) {
    json l = json::object();
    if (isl_link) l["isl"] = link_json(*isl_link);
    if (server_link) l["server"] = link_json(*server_link);
    j["links"] = l;
  }
  return j.dump(2);
}

void Scenario::validate() const {
  ZEN_ENFORCE(!satellites.empty(), "scenario '" + name + "' has no satellites");
  ZEN_ENFORCE(!servers.empty(), "scenario '" + name + "' has no server");
  ZEN_ENFORCE(elevation_mask_deg >= 0.0 && elevation_mask_deg < 90.0,
              "elevation mask " + std::to_string(elevation_mask_deg) + " deg out of [0, 90)");
  ZEN_ENFORCE(atmosphere_margin_m >= 0.0,
              "atmosphere margin " + std::to_string(atmosphere_margin_m) + " m is negative");
  std::map<int, std::set<int>> slots;
  for (std::size_t k = 0; k < satellites.size(); ++k) {
    const Satellite& s = satellites[k];
    ZEN_ENFORCE(s.elements.has_value() == (propagator == Propagator::Sgp4),
                "satellite " + std::to_string(k) + " '" + s.name + "': " +
                    (propagator == Propagator::Sgp4
                         ? std::string("propagator sgp4 needs mean elements for every satellite (a TLE / OMM file: "
                                       "--tle, or \"tle\" in the scenario JSON)")
                         : std::string("has mean elements but the propagator is ") + propagator_name(propagator)));
    ZEN_ENFORCE(s.id == static_cast<int>(k), "satellite at index " + std::to_string(k) + " has id " + std::to_string(s.id));
    ZEN_ENFORCE(s.plane >= 0 && s.slot >= 0, "satellite " + std::to_string(k) + " has negative plane/slot (" +
                                                  std::to_string(s.plane) + ", " + std::to_string(s.slot) + ")");
    ZEN_ENFORCE(s.orbit.altitude_m > atmosphere_margin_m,
                "satellite " + std::to_string(k) + " altitude " + std::to_string(s.orbit.altitude_m) +
                    " m is not above the blocking sphere");
    ZEN_ENFORCE(slots[s.plane].insert(s.slot).second, "satellite " + std::to_string(k) + " duplicates plane " +
                                                          std::to_string(s.plane) + " slot " + std::to_string(s.slot));
  }
  for (const auto& [plane, set] : slots) {
    ZEN_ENFORCE(*set.rbegin() == static_cast<int>(set.size()) - 1,
                "plane " + std::to_string(plane) + " slots are not 0.." + std::to_string(set.size() - 1));
  }
  ZEN_ENFORCE(!walker || satellites.size() >= static_cast<size_t>(walker->total),
              "scenario '" + name + "' has a Walker spec of " + std::to_string(walker ? walker->total : 0) +
                  " satellites but only " + std::to_string(satellites.size()) + " satellites");
  ZEN_ENFORCE(planes == count_planes(satellites),
              "scenario planes = " + std::to_string(planes) + " but satellites use " +
                  std::to_string(count_planes(satellites)));
  for (const auto& s : servers) {
    if (s.kind == ServerNode::Kind::Satellite)
      ZEN_ENFORCE(s.orbit.altitude_m > atmosphere_margin_m,
                  "server '" + s.name + "' altitude " + std::to_string(s.orbit.altitude_m) + " m too low");
    else
      ZEN_ENFORCE(s.station.lat_deg >= -90.0 && s.station.lat_deg <= 90.0,
                  "ground station '" + s.name + "' latitude " + std::to_string(s.station.lat_deg) + " out of range");
  }
}

std::vector<int> Scenario::plane_members(int plane) const {
  std::vector<int> ids;
  for (const auto& s : satellites)
    if (s.plane == plane) ids.push_back(s.id);
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return satellites[a].slot < satellites[b].slot; });
  return ids;
}

}  // namespace zen::orbit
