#pragma once
/// Circular orbits, two-body / J2-secular propagation, ground stations and the sidereal-time model.
///
/// Frame: Earth-centred inertial (ECI), metres, seconds from the scenario epoch. The ECI x axis is the
/// direction of Greenwich at t = 0 rotated back by gmst0: the Earth-fixed frame is the ECI frame
/// rotated about z by GMST theta(t) = theta0 + omega_E * t (theta0 = Scenario::gmst0_rad, default 0).
#include <string>

#include <Eigen/Core>
#include <Eigen/Geometry>

#include "zen/orbit/constants.hpp"

namespace zen::orbit {

using Vec3 = Eigen::Vector3d;

/// Propagator: pure two-body (exactly periodic, default), two-body plus J2 secular drift of the
/// RAAN and the argument of latitude, or SGP4 from each satellite's mean elements (Satellite::elements,
/// zen/orbit/sgp4.hpp; server satellites of such a scenario stay circular two-body orbits).
enum class Propagator { TwoBody, J2, Sgp4 };

/// "two-body", "j2" or "sgp4".
const char* propagator_name(Propagator p) noexcept;
/// Parses "two-body" / "twobody" / "j2" / "sgp4" (case-sensitive); throws zen::Error naming the value.
Propagator parse_propagator(const std::string& name);

/// A circular orbit (e = 0) given by its elements at the epoch.
struct CircularOrbit {
  double altitude_m = 0.0;       ///< h above r_E; radius a = r_E + h
  double inclination_rad = 0.0;  ///< i
  double raan_rad = 0.0;         ///< Omega at the epoch
  double arg_lat_rad = 0.0;      ///< u = omega + M at the epoch (argument of latitude)

  double radius_m() const noexcept { return kEarthRadius + altitude_m; }
};

/// n = sqrt(mu / a^3) [rad/s].
double mean_motion(double radius_m);
/// T = 2 pi sqrt(a^3 / mu) [s].
double orbital_period(double radius_m);
/// v = sqrt(mu / a) [m/s].
double orbital_speed(double radius_m);

/// Secular rates of a circular orbit: dOmega/dt and du/dt [rad/s].
/// Two-body (and Sgp4, whose circular orbits are the server satellites): (0, n). J2 (kappa = J2 (R_eq/a)^2): dOmega/dt = -1.5 n kappa cos i,
/// du/dt = n [1 + 1.5 kappa (4 cos^2 i - 1)].
struct SecularRates {
  double raan_dot = 0.0;
  double arg_lat_dot = 0.0;
};
SecularRates secular_rates(const CircularOrbit& orbit, Propagator propagator);

/// Fast position evaluator for one circular orbit under a propagator.
class Trajectory {
 public:
  Trajectory() = default;
  Trajectory(const CircularOrbit& orbit, Propagator propagator);

  /// r_ECI(t) = a [cos O cos u - sin O sin u cos i, sin O cos u + cos O sin u cos i, sin u sin i].
  Vec3 position(double t) const;
  double radius() const noexcept { return a_; }
  double raan(double t) const noexcept { return raan0_ + rates_.raan_dot * t; }
  double arg_lat(double t) const noexcept { return u0_ + rates_.arg_lat_dot * t; }
  const SecularRates& rates() const noexcept { return rates_; }
  /// Upper bound on |d r_hat / dt| [rad/s]: the direction of r turns no faster than this.
  double max_turn_rate() const noexcept;
  const CircularOrbit& orbit() const noexcept { return orbit_; }

 private:
  CircularOrbit orbit_{};
  double a_ = kEarthRadius;
  double raan0_ = 0.0, u0_ = 0.0, cos_i_ = 1.0, sin_i_ = 0.0;
  SecularRates rates_{};
};

/// A ground station: on the spherical Earth (radius r_E + alt, ground_ecef) in two-body / J2 scenarios, on
/// the WGS-84 ellipsoid (geodetic lat/lon, alt above the ellipsoid, geodetic_ecef) in SGP4 scenarios.
struct GroundStation {
  std::string name;
  double lat_deg = 0.0;
  double lon_deg = 0.0;
  double alt_m = 0.0;
};

/// WGS-84 ellipsoid (used for ground stations of SGP4 scenarios): a = 6378137 m, f = 1/298.257223563.
constexpr double kWgs84A = 6378137.0;
constexpr double kWgs84F = 1.0 / 298.257223563;
/// Earth-fixed position [m] of a geodetic point (lat, lon on the WGS-84 ellipsoid, alt above it):
/// N = a / sqrt(1 - e^2 sin^2 lat), r = ((N + h) cos lat cos lon, (N + h) cos lat sin lon, (N (1 - e^2) + h) sin lat).
Vec3 geodetic_ecef(const GroundStation& gs);
/// Unit normal of the WGS-84 ellipsoid at the station (the local zenith of geodetic latitude), Earth-fixed.
Vec3 geodetic_up(const GroundStation& gs);

/// GMST model: theta(t) = theta0 + omega_E t [rad].
inline double gmst(double t, double theta0) noexcept { return theta0 + kEarthRotation * t; }
/// Earth-fixed position of a ground station [m].
Vec3 ground_ecef(const GroundStation& gs);
/// Rotate an Earth-fixed vector into ECI at GMST theta, and back.
Vec3 ecef_to_eci(const Vec3& ecef, double theta);
Vec3 eci_to_ecef(const Vec3& eci, double theta);

/// Geocentric latitude / longitude [deg] of the point below an ECI position at GMST theta;
/// longitude in (-180, 180].
struct LatLon {
  double lat_deg = 0.0;
  double lon_deg = 0.0;
};
LatLon subpoint(const Vec3& eci, double theta);

}  // namespace zen::orbit
