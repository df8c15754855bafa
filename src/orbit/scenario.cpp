// Scenarios (zen/orbit/scenario.hpp): server nodes and ground stations, the built-in scenarios and
// the checks every scenario passes. The JSON form is in scenario_json.cpp, Walker constellations,
// SGP4 states and the plane assignment of element sets in constellation.cpp.
#include "zen/orbit/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "scenario_internal.hpp"
#include "zen/detail/parse.hpp"
#include "zen/error.hpp"

namespace zen::orbit {

namespace detail {

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

}  // namespace detail

using detail::count_planes;
using detail::meo_server;

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
  const std::vector<double> v = zen::detail::parse_doubles(
      body, ',', "server '" + spec + "': expected meo, bremen, northpole or [NAME=]LAT,LON[,ALT_M] in degrees and metres");
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
