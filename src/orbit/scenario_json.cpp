// The scenario JSON form (docs/orbit.md): Scenario::from_json_text / from_file read it, every field
// checked with an error naming it, and Scenario::to_json_text writes a scenario back as an editable
// config that reads in to the same scenario.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "scenario_internal.hpp"
#include "zen/error.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/orbit/time.hpp"

namespace zen::orbit {

using json = nlohmann::json;
using detail::count_planes;

namespace {

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

}  // namespace zen::orbit
