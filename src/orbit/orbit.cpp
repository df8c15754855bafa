#include "zen/orbit/orbit.hpp"

#include <cmath>

#include "zen/error.hpp"

namespace zen::orbit {

const char* propagator_name(Propagator p) noexcept {
  return p == Propagator::J2 ? "j2" : p == Propagator::Sgp4 ? "sgp4" : "two-body";
}

Propagator parse_propagator(const std::string& name) {
  if (name == "two-body" || name == "twobody") return Propagator::TwoBody;
  if (name == "j2") return Propagator::J2;
  if (name == "sgp4") return Propagator::Sgp4;
  ZEN_THROW(Result::InvalidArgument, "unknown propagator '" + name + "' (expected two-body, j2 or sgp4)");
}

double mean_motion(double radius_m) {
  ZEN_ENFORCE(radius_m > 0.0, "orbit radius must be positive, got " + std::to_string(radius_m));
  return std::sqrt(kEarthMu / (radius_m * radius_m * radius_m));
}

double orbital_period(double radius_m) { return kTwoPi / mean_motion(radius_m); }

double orbital_speed(double radius_m) {
  ZEN_ENFORCE(radius_m > 0.0, "orbit radius must be positive, got " + std::to_string(radius_m));
  return std::sqrt(kEarthMu / radius_m);
}

SecularRates secular_rates(const CircularOrbit& orbit, Propagator propagator) {
  const double a = orbit.radius_m();
  const double n = mean_motion(a);
  SecularRates r;
  r.arg_lat_dot = n;
  if (propagator == Propagator::J2) {
    const double kappa = kJ2 * (kEarthEquatorialRadius / a) * (kEarthEquatorialRadius / a);
    const double ci = std::cos(orbit.inclination_rad);
    r.raan_dot = -1.5 * n * kappa * ci;
    r.arg_lat_dot = n * (1.0 + 1.5 * kappa * (4.0 * ci * ci - 1.0));
  }
  return r;
}

Trajectory::Trajectory(const CircularOrbit& orbit, Propagator propagator)
    : orbit_(orbit),
      a_(orbit.radius_m()),
      raan0_(orbit.raan_rad),
      u0_(orbit.arg_lat_rad),
      cos_i_(std::cos(orbit.inclination_rad)),
      sin_i_(std::sin(orbit.inclination_rad)),
      rates_(secular_rates(orbit, propagator)) {
  ZEN_ENFORCE(orbit.altitude_m > -kEarthRadius,
              "orbit altitude " + std::to_string(orbit.altitude_m) + " m puts the radius below 0");
}

Vec3 Trajectory::position(double t) const {
  const double O = raan(t);
  const double u = arg_lat(t);
  const double cO = std::cos(O), sO = std::sin(O), cu = std::cos(u), su = std::sin(u);
  return Vec3(a_ * (cO * cu - sO * su * cos_i_), a_ * (sO * cu + cO * su * cos_i_), a_ * su * sin_i_);
}

double Trajectory::max_turn_rate() const noexcept {
  return std::abs(rates_.arg_lat_dot) + std::abs(rates_.raan_dot);
}

Vec3 ground_ecef(const GroundStation& gs) {
  ZEN_ENFORCE(gs.lat_deg >= -90.0 && gs.lat_deg <= 90.0,
              "ground station '" + gs.name + "' latitude " + std::to_string(gs.lat_deg) + " out of [-90, 90]");
  const double r = kEarthRadius + gs.alt_m;
  const double lat = gs.lat_deg * kDegToRad, lon = gs.lon_deg * kDegToRad;
  return Vec3(r * std::cos(lat) * std::cos(lon), r * std::cos(lat) * std::sin(lon), r * std::sin(lat));
}

Vec3 geodetic_ecef(const GroundStation& gs) {
  ZEN_ENFORCE(gs.lat_deg >= -90.0 && gs.lat_deg <= 90.0,
              "ground station '" + gs.name + "' latitude " + std::to_string(gs.lat_deg) + " out of [-90, 90]");
  const double e2 = kWgs84F * (2.0 - kWgs84F);
  const double lat = gs.lat_deg * kDegToRad, lon = gs.lon_deg * kDegToRad;
  const double s = std::sin(lat), c = std::cos(lat);
  const double N = kWgs84A / std::sqrt(1.0 - e2 * s * s);
  return Vec3((N + gs.alt_m) * c * std::cos(lon), (N + gs.alt_m) * c * std::sin(lon), (N * (1.0 - e2) + gs.alt_m) * s);
}

Vec3 geodetic_up(const GroundStation& gs) {
  const double lat = gs.lat_deg * kDegToRad, lon = gs.lon_deg * kDegToRad;
  return Vec3(std::cos(lat) * std::cos(lon), std::cos(lat) * std::sin(lon), std::sin(lat));
}

Vec3 ecef_to_eci(const Vec3& e, double theta) {
  const double c = std::cos(theta), s = std::sin(theta);
  return Vec3(c * e.x() - s * e.y(), s * e.x() + c * e.y(), e.z());
}

Vec3 eci_to_ecef(const Vec3& v, double theta) {
  const double c = std::cos(theta), s = std::sin(theta);
  return Vec3(c * v.x() + s * v.y(), -s * v.x() + c * v.y(), v.z());
}

LatLon subpoint(const Vec3& eci, double theta) {
  const Vec3 e = eci_to_ecef(eci, theta);
  LatLon ll;
  ll.lat_deg = std::atan2(e.z(), std::hypot(e.x(), e.y())) * kRadToDeg;
  ll.lon_deg = std::atan2(e.y(), e.x()) * kRadToDeg;
  if (ll.lon_deg <= -180.0) ll.lon_deg += 360.0;
  return ll;
}

}  // namespace zen::orbit
