#pragma once
/// Visibility geometry: satellite-satellite line of sight, ground-station elevation masks,
/// intra-orbit ISL rings, and the Geometry evaluator used by the window predictor.
#include <optional>
#include <string>
#include <vector>

#include "zen/orbit/scenario.hpp"
#include "zen/orbit/sgp4.hpp"

namespace zen::orbit {

/// True when the segment a-b stays strictly outside the sphere of radius block_radius
/// (block_radius = r_E + atmosphere margin).
bool line_of_sight(const Vec3& a, const Vec3& b, double block_radius);
/// Maximum line-of-sight distance between radii r1 and r2 (grazing the sphere block_radius):
/// sqrt(r1^2 - R^2) + sqrt(r2^2 - R^2).
double tangent_distance(double r1, double r2, double block_radius);
/// Largest central angle between two position vectors of radii r1, r2 that still have line of
/// sight: acos(R/r1) + acos(R/r2).
double los_half_angle(double r1, double r2, double block_radius);

/// Elevation [rad] of a satellite seen from a ground station (both ECI or both ECEF), local vertical
/// = the station's radial direction: sin(el) = (r_s - r_g) . r_g_hat / |r_s - r_g|.
double elevation(const Vec3& sat, const Vec3& station);
/// Coverage half-angle [rad]: the largest central angle between station (radius r_g) and satellite
/// (radius r_s) with elevation >= mask: acos(r_g cos(mask) / r_s) - mask.
double coverage_half_angle(double r_sat, double r_station, double mask_rad);
/// Slant range at the elevation mask: sqrt(r_s^2 - r_g^2 cos^2 el) - r_g sin el.
double max_slant_range(double r_sat, double r_station, double mask_rad);

/// Intra-orbit ISL ring of S equally spaced satellites on a circle of radius a.
/// Chord d = 2 a sin(pi/S); feasible iff the chord clears block_radius: a cos(pi/S) > block_radius.
double ring_chord(double radius_m, int sats_per_plane);
bool ring_feasible(double radius_m, int sats_per_plane, double block_radius);
/// Lowest altitude [m] whose ring clears r_E + margin: (r_E + margin)/cos(pi/S) - r_E.
double ring_min_altitude(int sats_per_plane, double margin_m = 0.0);
/// Hop count on a ring: min(|a-b|, S-|a-b|).
int ring_hops(int slot_a, int slot_b, int sats_per_plane);

/// Ring of one plane of a scenario, computed from the satellites' geometry.
struct RingInfo {
  int plane = 0;
  int sats = 0;                 ///< S (members of the plane)
  double neighbour_distance_m = 0.0;  ///< largest neighbour chord (constant in time for a circular plane)
  double chord_clearance_m = 0.0;     ///< closest approach of the chords to the Earth's centre minus r_E
  bool feasible = false;              ///< every neighbour link has line of sight (with margin)
  /// Same radius, same plane, equal spacing (true for Walker). SGP4 planes: false, except a plane of one
  /// satellite (no ISL; uniform as in the circular path).
  bool uniform = false;
};
/// Throws zen::Error if the plane has no members. Neighbours are slot order (j, j+1 mod S). Distances,
/// clearance and feasibility are those at t = 0 (SGP4 scenarios: the SGP4 positions at the start).
RingInfo ring_info(const Scenario& sc, int plane);
std::vector<RingInfo> ring_infos(const Scenario& sc);
/// Human-readable warnings for infeasible rings ("plane 2: 8 satellites at 500 km ... blocked").
std::vector<std::string> ring_warnings(const Scenario& sc);

/// Precomputed trajectories of a scenario (holds a copy of it); cheap position / visibility
/// queries. Const methods are thread-safe.
///
/// SGP4 scenarios: satellite positions are SGP4 TEME positions at start + t (metres); ground stations
/// sit on the WGS-84 ellipsoid and are rotated into TEME by theta(t) = gmst0 + omega_E t; the margin to
/// a ground station is elevation - mask [rad] with the elevation measured from the ellipsoid normal,
/// the margin to a server satellite is the line of sight's clearance above r_E + margin [m]. An SGP4
/// failure (decay) is a zen::Error naming the satellite and the time.
class Geometry {
 public:
  explicit Geometry(const Scenario& sc);

  const Scenario& scenario() const noexcept { return sc_; }
  int num_satellites() const noexcept { return static_cast<int>(sats_.size()); }
  int num_servers() const noexcept { return static_cast<int>(server_orbits_.size()); }

  Vec3 sat_position(int sat, double t) const;
  Vec3 server_position(int peer, double t) const;
  double distance(int sat, int peer, double t) const;
  bool visible(int sat, int peer, double t) const { return margin(sat, peer, t) >= 0.0; }

  /// Visibility margin: visible iff >= 0, continuous in t. Two-body / J2 [rad]: (largest visible
  /// central angle) - (current central angle between the satellite and the peer). SGP4: see above.
  double margin(int sat, int peer, double t) const;
  /// Upper bound on |d margin / dt| (units of margin per second). Two-body / J2: sum of the two
  /// direction turn rates. SGP4, ground station: |d el/dt| <= |v_rel| / range + omega_E with
  /// |v_rel| <= sqrt(2 mu / r_lo) + omega_E |r_station| and range >= r_lo - |r_station|; server
  /// satellite: max(sqrt(2 mu / r_lo), v_server). r_lo = R_eq + (r_p - R_eq) / 2: half the mean
  /// perigee altitude (r_p from the elements) above the WGS-84 equatorial radius (checked, with the
  /// speed bound, at every margin evaluation: a satellite outside them is a zen::Error).
  double margin_rate_bound(int sat, int peer) const;
  /// ISL line of sight / distance between two constellation satellites.
  bool sat_sat_visible(int a, int b, double t) const;
  /// Two-body / J2: the satellite's trajectory. SGP4: the circular orbit of Satellite::orbit (an
  /// approximation at the start, not what sat_position returns).
  const Trajectory& trajectory(int sat) const { return sats_.at(static_cast<std::size_t>(sat)); }
  /// SGP4 scenarios: the satellite's model; nullptr otherwise.
  const Sgp4* sgp4(int sat) const;

 private:
  Vec3 sgp4_position(std::size_t sat, double t) const;

  Scenario sc_;
  std::vector<Trajectory> sats_;
  std::vector<std::optional<Sgp4>> sgp4_;  // SGP4 scenarios
  std::vector<double> r_lo_;               // SGP4: radius lower bound assumed by the rate bound [m]
  std::vector<Vec3> station_up_;           // SGP4, ground servers: ellipsoid normal (Earth-fixed)
  std::vector<Trajectory> server_orbits_;  // valid for satellite servers
  std::vector<Vec3> station_ecef_;         // valid for ground servers
  std::vector<char> is_ground_;
  std::vector<double> limit_;       // [sat * num_servers + peer]: largest visible central angle
  std::vector<double> rate_bound_;  // [sat * num_servers + peer]
  double block_radius_ = kEarthRadius;
};

}  // namespace zen::orbit
