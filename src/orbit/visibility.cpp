#include "zen/orbit/visibility.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "zen/error.hpp"
#include "zen/orbit/time.hpp"

namespace zen::orbit {

namespace {

// Distance from the origin to the segment a-b.
double segment_origin_distance(const Vec3& a, const Vec3& b) {
  const Vec3 d = b - a;
  const double dd = d.squaredNorm();
  if (dd == 0.0) return a.norm();
  const double s = std::clamp(-a.dot(d) / dd, 0.0, 1.0);
  return (a + s * d).norm();
}

double central_angle(const Vec3& a, const Vec3& b) { return std::atan2(a.cross(b).norm(), a.dot(b)); }

}  // namespace

bool line_of_sight(const Vec3& a, const Vec3& b, double block_radius) {
  return segment_origin_distance(a, b) > block_radius;
}

double tangent_distance(double r1, double r2, double R) {
  ZEN_ENFORCE(r1 >= R && r2 >= R, "tangent_distance: radii " + std::to_string(r1) + ", " + std::to_string(r2) +
                                      " m must be >= the blocking radius " + std::to_string(R) + " m");
  return std::sqrt(r1 * r1 - R * R) + std::sqrt(r2 * r2 - R * R);
}

double los_half_angle(double r1, double r2, double R) {
  ZEN_ENFORCE(r1 >= R && r2 >= R, "los_half_angle: radii " + std::to_string(r1) + ", " + std::to_string(r2) +
                                      " m must be >= the blocking radius " + std::to_string(R) + " m");
  return std::acos(R / r1) + std::acos(R / r2);
}

double elevation(const Vec3& sat, const Vec3& station) {
  const Vec3 d = sat - station;
  const double n = d.norm();
  if (n == 0.0) return kPi / 2;
  return std::asin(std::clamp(d.dot(station.normalized()) / n, -1.0, 1.0));
}

double coverage_half_angle(double r_sat, double r_station, double mask_rad) {
  const double x = r_station * std::cos(mask_rad) / r_sat;
  ZEN_ENFORCE(x <= 1.0, "coverage_half_angle: satellite radius " + std::to_string(r_sat) +
                            " m never reaches the mask above a station at radius " + std::to_string(r_station) + " m");
  return std::acos(x) - mask_rad;
}

double max_slant_range(double r_sat, double r_station, double mask_rad) {
  const double c = std::cos(mask_rad), s = std::sin(mask_rad);
  return std::sqrt(r_sat * r_sat - r_station * r_station * c * c) - r_station * s;
}

double ring_chord(double radius_m, int S) {
  ZEN_ENFORCE(S >= 1, "ring size must be >= 1, got " + std::to_string(S));
  if (S == 1) return 0.0;
  return 2.0 * radius_m * std::sin(kPi / S);
}

bool ring_feasible(double radius_m, int S, double block_radius) {
  ZEN_ENFORCE(S >= 1, "ring size must be >= 1, got " + std::to_string(S));
  if (S == 1) return true;
  return radius_m * std::cos(kPi / S) > block_radius;
}

double ring_min_altitude(int S, double margin_m) {
  ZEN_ENFORCE(S >= 3, "ring_min_altitude needs S >= 3, got " + std::to_string(S));
  return (kEarthRadius + margin_m) / std::cos(kPi / S) - kEarthRadius;
}

int ring_hops(int a, int b, int S) {
  ZEN_ENFORCE(S >= 1 && a >= 0 && a < S && b >= 0 && b < S,
              "ring_hops: slots " + std::to_string(a) + ", " + std::to_string(b) + " not in [0, " + std::to_string(S) + ")");
  const int d = std::abs(a - b);
  return std::min(d, S - d);
}

RingInfo ring_info(const Scenario& sc, int plane) {
  const std::vector<int> ids = sc.plane_members(plane);
  ZEN_ENFORCE(!ids.empty(), "plane " + std::to_string(plane) + " has no satellites");
  RingInfo info;
  info.plane = plane;
  info.sats = static_cast<int>(ids.size());
  const double R = kEarthRadius + sc.atmosphere_margin_m;
  const int S = info.sats;
  const CircularOrbit& o0 = sc.satellites[ids[0]].orbit;
  // Positions at t = 0: the chords of a circular plane stay constant; SGP4 planes are taken at the start.
  std::vector<Vec3> r;
  if (sc.propagator == Propagator::Sgp4) {
    // Real orbits: never uniform (the FL timing checks every hop when it is used).
    // A plane of one has no ISL: uniform as in the circular path (nothing to check, no self-link).
    info.uniform = S == 1;
    for (int id : ids)
      r.push_back(sgp4_state(Sgp4(*sc.satellites[static_cast<std::size_t>(id)].elements), id, sc.start_jd,
                             sc.start_jd_frac, 0.0)
                      .r_m);
  } else {
    // Uniform: same radius, inclination and RAAN, equal spacing of u.
    bool uniform = true;
    for (int k = 0; k < S; ++k) {
      const CircularOrbit& o = sc.satellites[ids[k]].orbit;
      const double du = std::remainder(o.arg_lat_rad - o0.arg_lat_rad - kTwoPi * k / S, kTwoPi);
      if (std::abs(o.altitude_m - o0.altitude_m) > 1e-6 || std::abs(o.inclination_rad - o0.inclination_rad) > 1e-12 ||
          std::abs(std::remainder(o.raan_rad - o0.raan_rad, kTwoPi)) > 1e-12 || std::abs(du) > 1e-9)
        uniform = false;
    }
    info.uniform = uniform;
    for (int id : ids) r.push_back(Trajectory(sc.satellites[static_cast<std::size_t>(id)].orbit, sc.propagator).position(0.0));
  }
  if (S == 1) {
    info.feasible = true;
    info.chord_clearance_m = sc.propagator == Propagator::Sgp4 ? r[0].norm() - kEarthRadius : o0.altitude_m;
    return info;
  }
  double min_closest = 1e300;
  bool feasible = true;
  for (int k = 0; k < S; ++k) {
    const Vec3 &ra = r[static_cast<std::size_t>(k)], &rb = r[static_cast<std::size_t>((k + 1) % S)];
    info.neighbour_distance_m = std::max(info.neighbour_distance_m, (ra - rb).norm());
    const double closest = segment_origin_distance(ra, rb);
    min_closest = std::min(min_closest, closest);
    if (!(closest > R)) feasible = false;
  }
  info.chord_clearance_m = min_closest - kEarthRadius;
  info.feasible = feasible;
  return info;
}

std::vector<RingInfo> ring_infos(const Scenario& sc) {
  std::vector<RingInfo> out;
  for (int p = 0; p < sc.planes; ++p)
    if (!sc.plane_members(p).empty()) out.push_back(ring_info(sc, p));
  return out;
}

std::vector<std::string> ring_warnings(const Scenario& sc) {
  std::vector<std::string> out;
  for (const RingInfo& r : ring_infos(sc)) {
    if (r.feasible) continue;
    const double alt = sc.satellites[sc.plane_members(r.plane)[0]].orbit.altitude_m;
    char buf[400];
    if (!r.uniform) {
      // Real (SGP4) or hand-made planes: uneven spacing, not an altitude question.
      std::snprintf(buf, sizeof buf,
                    "plane %d: %d satellites near %.1f km: a neighbour ISL (largest %.1f km) is blocked at t = 0, its "
                    "chord passes %.1f km below r_E + margin (%.1f km); the FL timing checks every hop when it is used",
                    r.plane, r.sats, alt / 1e3, r.neighbour_distance_m / 1e3,
                    (kEarthRadius + sc.atmosphere_margin_m - (r.chord_clearance_m + kEarthRadius)) / 1e3,
                    sc.atmosphere_margin_m / 1e3);
      out.emplace_back(buf);
      continue;
    }
    std::snprintf(buf, sizeof buf,
                  "plane %d: %d satellites at %.1f km: neighbour ISL (%.1f km) is blocked, its chord passes "
                  "%.1f km below r_E + margin (%.1f km); a ring of %d needs altitude >= %.1f km",
                  r.plane, r.sats, alt / 1e3, r.neighbour_distance_m / 1e3,
                  (kEarthRadius + sc.atmosphere_margin_m - (r.chord_clearance_m + kEarthRadius)) / 1e3,
                  sc.atmosphere_margin_m / 1e3, r.sats,
                  r.sats >= 3 ? ring_min_altitude(r.sats, sc.atmosphere_margin_m) / 1e3 : 0.0);
    out.emplace_back(buf);
  }
  return out;
}

Geometry::Geometry(const Scenario& sc) : sc_(sc), block_radius_(kEarthRadius + sc.atmosphere_margin_m) {
  sc_.validate();
  const bool sgp4 = sc_.propagator == Propagator::Sgp4;
  for (const auto& s : sc_.satellites) sats_.emplace_back(s.orbit, sc_.propagator);
  for (const auto& s : sc_.servers) {
    const bool ground = s.kind == ServerNode::Kind::Ground;
    is_ground_.push_back(ground ? 1 : 0);
    server_orbits_.push_back(ground ? Trajectory() : Trajectory(s.orbit, sc_.propagator));
    station_ecef_.push_back(!ground ? Vec3::Zero() : sgp4 ? geodetic_ecef(s.station) : ground_ecef(s.station));
    station_up_.push_back(ground && sgp4 ? geodetic_up(s.station) : Vec3::Zero());
  }
  const int ns = num_servers();
  const double mask = sc_.elevation_mask_deg * kDegToRad;
  limit_.resize(sats_.size() * static_cast<std::size_t>(ns));
  rate_bound_.resize(limit_.size());
  if (sgp4) {
    for (std::size_t k = 0; k < sats_.size(); ++k) {
      const MeanElements& e = *sc_.satellites[k].elements;
      sgp4_.emplace_back(Sgp4(e));
      const double n = e.mean_motion_rev_per_day * kTwoPi / 86400.0;
      const double a = std::cbrt(kEarthMu / (n * n));
      // Radius bound of the step bound: half the mean perigee altitude above the equatorial radius.
      const double rp = a * (1.0 - e.eccentricity);
      ZEN_ENFORCE(rp > kWgs84A, "satellite " + std::to_string(k) + " '" + sc_.satellites[k].name +
                                    "': mean perigee radius " + std::to_string(rp / 1e3) +
                                    " km is below the Earth's equatorial radius");
      r_lo_.push_back(kWgs84A + 0.5 * (rp - kWgs84A));
      const double v_hi = std::sqrt(2.0 * kEarthMu / r_lo_[k]);  // any bound orbit: v^2 < 2 mu / r
      for (int p = 0; p < ns; ++p) {
        const std::size_t idx = k * static_cast<std::size_t>(ns) + static_cast<std::size_t>(p);
        if (is_ground_[p]) {
          const double rs = station_ecef_[p].norm();
          const double range_lo = r_lo_[k] - rs;
          ZEN_ENFORCE(range_lo > 0.0, "satellite " + std::to_string(k) + " '" + sc_.satellites[k].name +
                                          "': perigee too low for the window scan's bound (radius bound " +
                                          std::to_string(r_lo_[k] / 1e3) + " km is not above station '" +
                                          sc_.servers[p].name + "')");
          rate_bound_[idx] = (v_hi + kEarthRotation * rs) / range_lo + kEarthRotation;
        } else {
          rate_bound_[idx] = std::max(v_hi, server_orbits_[p].radius() * server_orbits_[p].max_turn_rate());
        }
      }
    }
    return;
  }
  for (std::size_t k = 0; k < sats_.size(); ++k) {
    for (int p = 0; p < ns; ++p) {
      const std::size_t idx = k * static_cast<std::size_t>(ns) + static_cast<std::size_t>(p);
      if (is_ground_[p]) {
        const double lat = sc_.servers[p].station.lat_deg * kDegToRad;
        limit_[idx] = coverage_half_angle(sats_[k].radius(), station_ecef_[p].norm(), mask);
        rate_bound_[idx] = sats_[k].max_turn_rate() + kEarthRotation * std::abs(std::cos(lat));
      } else {
        limit_[idx] = los_half_angle(sats_[k].radius(), server_orbits_[p].radius(), block_radius_);
        rate_bound_[idx] = sats_[k].max_turn_rate() + server_orbits_[p].max_turn_rate();
      }
    }
  }
}

const Sgp4* Geometry::sgp4(int sat) const {
  ZEN_ENFORCE(sat >= 0 && sat < num_satellites(), "satellite index " + std::to_string(sat) + " out of range");
  return sgp4_.empty() ? nullptr : &*sgp4_[static_cast<std::size_t>(sat)];
}

Vec3 Geometry::sgp4_position(std::size_t sat, double t) const {
  return sgp4_state(*sgp4_[sat], static_cast<int>(sat), sc_.start_jd, sc_.start_jd_frac, t).r_m;
}

Vec3 Geometry::sat_position(int sat, double t) const {
  const std::size_t k = static_cast<std::size_t>(sat);
  ZEN_ENFORCE(sat >= 0 && k < sats_.size(), "satellite index " + std::to_string(sat) + " out of range");
  if (!sgp4_.empty()) return sgp4_position(k, t);
  return sats_[k].position(t);
}

Vec3 Geometry::server_position(int peer, double t) const {
  const std::size_t p = static_cast<std::size_t>(peer);
  ZEN_ENFORCE(peer >= 0 && p < is_ground_.size(), "server index " + std::to_string(peer) + " out of range");
  if (is_ground_[p]) return ecef_to_eci(station_ecef_[p], gmst(t, sc_.gmst0_rad));
  return server_orbits_[p].position(t);
}

double Geometry::distance(int sat, int peer, double t) const {
  return (sat_position(sat, t) - server_position(peer, t)).norm();
}

double Geometry::margin(int sat, int peer, double t) const {
  if (!sgp4_.empty()) {
    ZEN_ENFORCE(sat >= 0 && sat < num_satellites(), "satellite index " + std::to_string(sat) + " out of range");
    const std::size_t k = static_cast<std::size_t>(sat), p = static_cast<std::size_t>(peer);
    const SatState st = sgp4_state(*sgp4_[k], sat, sc_.start_jd, sc_.start_jd_frac, t);
    const Vec3& a = st.r_m;
    const Vec3 b = server_position(peer, t);
    // The step bound assumes |r| >= r_lo and hence |v| <= sqrt(2 mu / r_lo): check both here.
    const double v_hi = std::sqrt(2.0 * kEarthMu / r_lo_[k]);
    if (a.norm() < r_lo_[k] || st.v_m_s.norm() > v_hi) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "': at t = %.3f s radius %.1f km, speed %.3f km/s; the window scan's step bound "
                    "assumes radius >= %.1f km and speed <= %.3f km/s", t, a.norm() / 1e3, st.v_m_s.norm() / 1e3,
                    r_lo_[k] / 1e3, v_hi / 1e3);
      ZEN_THROW(Result::InvalidArgument, "satellite " + std::to_string(sat) + " '" + sc_.satellites[k].name + buf +
                                             " (half its mean perigee altitude above the equatorial radius): it is "
                                             "decaying or t is too far from the element epoch");
    }
    if (is_ground_[p]) {
      const Vec3 up = ecef_to_eci(station_up_[p], gmst(t, sc_.gmst0_rad));
      const Vec3 d = a - b;
      return std::asin(std::clamp(d.dot(up) / d.norm(), -1.0, 1.0)) - sc_.elevation_mask_deg * kDegToRad;
    }
    return segment_origin_distance(a, b) - block_radius_;
  }
  const Vec3 a = sat_position(sat, t);
  const Vec3 b = server_position(peer, t);
  return limit_[static_cast<std::size_t>(sat) * is_ground_.size() + static_cast<std::size_t>(peer)] -
         central_angle(a, b);
}

double Geometry::margin_rate_bound(int sat, int peer) const {
  ZEN_ENFORCE(sat >= 0 && sat < num_satellites() && peer >= 0 && peer < num_servers(),
              "margin_rate_bound: (sat " + std::to_string(sat) + ", peer " + std::to_string(peer) + ") out of range");
  return rate_bound_[static_cast<std::size_t>(sat) * is_ground_.size() + static_cast<std::size_t>(peer)];
}

bool Geometry::sat_sat_visible(int a, int b, double t) const {
  return line_of_sight(sat_position(a, t), sat_position(b, t), block_radius_);
}

}  // namespace zen::orbit
