#pragma once
/// Scenarios: a LEO constellation (satellites with plane/slot ids), the parameter server (one
/// satellite, e.g. MEO/GEO, or one or more ground stations), the propagator and the visibility
/// settings. Loadable by name or from a JSON config (format in docs/orbit.md).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zen/orbit/link.hpp"
#include "zen/orbit/orbit.hpp"
#include "zen/orbit/sgp4.hpp"
#include "zen/orbit/tle.hpp"

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
  /// Two-body / J2: the orbit. SGP4: the circular orbit closest to the satellite's SGP4 state at the
  /// scenario start (radius |r| - r_E as altitude, inclination, RAAN and argument of latitude of r x v);
  /// informational (JSON, plots), the geometry uses the elements.
  CircularOrbit orbit;
  /// Mean elements (TLE / OMM): present exactly when the scenario's propagator is Sgp4.
  std::optional<MeanElements> elements;
};

/// Minutes from an element set's epoch to t_s seconds after the UTC instant start_jd + start_frac
/// (differences taken in the split form, so microseconds survive).
double minutes_since_epoch(const MeanElements& e, double start_jd, double start_frac, double t_s);

/// SGP4 state in metres and m/s (TEME).
struct SatState {
  Vec3 r_m;
  Vec3 v_m_s;
};
/// model's state t_s seconds after the start. An Sgp4Error (decay, ...) becomes a zen::Error naming the
/// satellite (`sat` = its index, the element set's name and catalog number), t_s, the UTC instant and
/// the SGP4 code.
SatState sgp4_state(const Sgp4& model, int sat, double start_jd, double start_frac, double t_s);

/// The start (t = 0) of an SGP4 scenario of these element sets as (jd of 0h, day fraction): start_utc
/// parsed (parse_utc) when given, else the earliest epoch. Throws zen::Error for no elements or a bad
/// start.
std::pair<double, double> elements_start(const std::vector<MeanElements>& elements, const std::string& start_utc = "");

/// Thresholds of the automatic plane grouping of SGP4 satellites (docs/orbit.md, "Planes of real
/// constellations"). Two satellites share a plane when the angle between their orbit normals
/// (unit r x v at the start) is at most max_normal_angle_deg and their semi-major axes (from the
/// osculating state, a = 1 / (2/r - v^2/mu)) differ by at most max_sma_diff_km.
struct PlaneClustering {
  double max_normal_angle_deg = 1.5;
  double max_sma_diff_km = 25.0;
};

/// Groups satellites with mean elements into planes at the UTC instant start_jd + start_frac: each
/// satellite in file order joins the first plane whose mean normal and mean semi-major axis are within
/// the thresholds, else opens a new plane; then every satellite is reassigned once to the closest plane
/// mean within the thresholds (a satellite near none keeps a plane of its own: a ring of 1). Planes are
/// numbered by their first member in file order; slots within a plane follow the argument of latitude
/// at the start, from the smallest in [0, 360) deg. Sets plane, slot and the circular `orbit` of each
/// satellite. Throws zen::Error naming the satellite when SGP4 fails at the start.
void assign_planes(std::vector<Satellite>& sats, double start_jd, double start_frac,
                   const PlaneClustering& thresholds = {});

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

/// Ground stations from a CSV file: '#' comment and blank lines skipped, then one
/// `name,lat_deg,lon_deg[,alt_m]` per line (e.g. tests/data/ground-stations/landsat13.csv). Throws
/// zen::Error naming file:line for a bad row, a duplicate name or a file without stations.
std::vector<ServerNode> read_ground_stations(const std::string& path);

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
  /// SGP4 scenarios: t = 0 is the UTC instant start_jd + start_jd_frac (default: the earliest element
  /// epoch); gmst0_rad = gmst_rad(start) with UT1 = UTC; epoch_utc = format_utc(start).
  double start_jd = 0.0, start_jd_frac = 0.0;
  /// SGP4 scenarios read from a file: its path (written back by to_json_text as "tle").
  std::string elements_file;
  double elevation_mask_deg = 10.0;   ///< ground-station minimum elevation
  double atmosphere_margin_m = 0.0;   ///< line of sight must clear r_E + margin (sat-sat links)
  /// Link budgets of the scenario (JSON "links": {"isl": {...}, "server": {...}}, docs/orbit.md);
  /// the FL timing uses them with the link preset "scenario".
  std::optional<LinkPreset> isl_link, server_link;

  /// Built-in names: reference, reference-star, bremen, northpole, starlink, razmi2022.
  static std::vector<std::string> builtin_names();
  /// Built-in scenario by name (propagator two-body); throws zen::Error for an unknown name.
  static Scenario named(const std::string& name);
  /// From JSON text / a JSON file (format in docs/orbit.md); throws zen::Error on bad input. A
  /// relative "tle" path is taken relative to base_dir (from_file: the JSON file's directory).
  static Scenario from_json_text(const std::string& text, const std::string& base_dir = "");
  static Scenario from_file(const std::string& path);
  /// SGP4 scenario of element sets (propagator Sgp4, satellites in the given order, planes from
  /// assign_planes at the start). start_utc: ISO 8601 UTC (parse_utc); empty = the earliest epoch.
  /// servers: empty = the default MEO server (20 000 km, equatorial). Throws zen::Error for no
  /// elements, a bad start or SGP4 failing at the start.
  static Scenario from_elements(const std::vector<MeanElements>& elements, const std::string& start_utc = "",
                                std::vector<ServerNode> servers = {}, const PlaneClustering& thresholds = {});
  /// from_elements(read_elements(path), ...), remembering the path.
  static Scenario from_elements_file(const std::string& path, const std::string& start_utc = "",
                                     std::vector<ServerNode> servers = {}, const PlaneClustering& thresholds = {});
  /// JSON of this scenario, loadable with from_json_text: the "walker" block (plus any extra
  /// satellites) when there is one, else the explicit satellite list.
  std::string to_json_text() const;

  /// Checks ids, plane/slot consistency, radii above r_E, elements present exactly for Sgp4; throws
  /// zen::Error naming the bad value.
  void validate() const;
  int num_satellites() const noexcept { return static_cast<int>(satellites.size()); }
  /// Satellite ids of a plane, sorted by slot.
  std::vector<int> plane_members(int plane) const;
};

}  // namespace zen::orbit
