#pragma once
/// Scenarios: a LEO constellation (satellites with plane/slot ids), the parameter server (one
/// satellite, e.g. MEO/GEO, or one or more ground stations), the propagator and the visibility
/// settings. Loadable by name or from a JSON config (format in docs/orbit.md).
#include <optional>
#include <string>
#include <vector>

#include "zen/orbit/link.hpp"
#include "zen/orbit/orbit.hpp"

namespace zen::orbit {

/// Walker pattern: delta spreads the planes' RAAN over 2 pi, star over pi.
enum class WalkerPattern { Delta, Star };
const char* walker_pattern_name(WalkerPattern p) noexcept;
WalkerPattern parse_walker_pattern(const std::string& name);  ///< "delta" | "star"

/// Walker i:T/P/F. Plane p, slot j (id k = p*S + j, S = T/P):
///   RAAN_p = raan0 + Delta * p / P  (Delta = 2 pi for delta, pi for star),
///   u_pj   = u0 + 2 pi (j / S + F p / T).
struct WalkerSpec {
  WalkerPattern pattern = WalkerPattern::Delta;
  double inclination_deg = 0.0;
  int total = 0;    ///< T
  int planes = 0;   ///< P (T % P must be 0)
  int phasing = 0;  ///< F in [0, P-1]
  double altitude_m = 0.0;
  double raan0_deg = 0.0;
  double u0_deg = 0.0;
};

/// A constellation member. id is its index in Scenario::satellites.
struct Satellite {
  int id = 0;
  int plane = 0;
  int slot = 0;
  std::string name;
  CircularOrbit orbit;
};

/// Builds the T satellites of a Walker constellation in id order (k = p*S + j).
std::vector<Satellite> make_walker(const WalkerSpec& spec);

/// A parameter-server endpoint: a satellite (MEO, GEO, ...) or a ground station.
struct ServerNode {
  enum class Kind { Satellite, Ground };
  Kind kind = Kind::Satellite;
  std::string name;
  CircularOrbit orbit;    ///< Kind::Satellite
  GroundStation station;  ///< Kind::Ground

  static ServerNode satellite(std::string name, const CircularOrbit& orbit);
  static ServerNode ground(const GroundStation& gs);
};

/// A server endpoint from a command-line spec: "meo" (20 000 km, equatorial), "bremen" (53.0 N,
/// 8.8 E), "northpole", or a ground station "[NAME=]LAT,LON[,ALT_M]" (degrees, metres). Throws
/// zen::Error naming the spec.
ServerNode parse_server(const std::string& spec);

struct Scenario {
  std::string name;
  std::vector<Satellite> satellites;  ///< satellites[k].id == k
  /// The Walker spec the first walker->total satellites were built from (built-ins and JSON
  /// "walker"); the satellites after them are extras. Absent for an explicit satellite list. A JSON
  /// config's "walker" block takes its missing fields from here (the base's constellation).
  std::optional<WalkerSpec> walker;
  int planes = 0;                     ///< number of planes (max plane id + 1)
  std::vector<ServerNode> servers;    ///< peers of the windows; index = "peer" id
  Propagator propagator = Propagator::TwoBody;
  std::string epoch_utc = "2021-10-24T14:58:51Z";  ///< informational; geometry uses seconds from it
  double gmst0_rad = 0.0;             ///< theta0 of theta(t) = theta0 + omega_E t
  double elevation_mask_deg = 10.0;   ///< ground-station minimum elevation
  double atmosphere_margin_m = 0.0;   ///< line of sight must clear r_E + margin (sat-sat links)
  /// Link budgets of the scenario (JSON "links": {"isl": {...}, "server": {...}}, docs/orbit.md);
  /// the FL timing uses them with the link preset "scenario".
  std::optional<LinkPreset> isl_link, server_link;

  /// Built-in names: reference, reference-star, bremen, northpole, starlink, razmi2022.
  static std::vector<std::string> builtin_names();
  /// Built-in scenario by name (propagator two-body); throws zen::Error for an unknown name.
  static Scenario named(const std::string& name);
  /// From JSON text / a JSON file (format in docs/orbit.md); throws zen::Error on bad input.
  static Scenario from_json_text(const std::string& text);
  static Scenario from_file(const std::string& path);
  /// JSON of this scenario, loadable with from_json_text: the "walker" block (plus any extra
  /// satellites) when there is one, else the explicit satellite list.
  std::string to_json_text() const;

  /// Checks ids, plane/slot consistency, radii above r_E; throws zen::Error naming the bad value.
  void validate() const;
  int num_satellites() const noexcept { return static_cast<int>(satellites.size()); }
  /// Satellite ids of a plane, sorted by slot.
  std::vector<int> plane_members(int plane) const;
};

}  // namespace zen::orbit
