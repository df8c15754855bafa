#pragma once
/// SGP4/SDP4 propagation of NORAD mean element sets (TLE / OMM) in the TEME frame.
///
/// Near-Earth SGP4 (period < 225 min) and deep-space SDP4 (lunar-solar periodics and secular terms,
/// 12 h and 24 h resonance integrator), written from Hoots & Roehrich, "Spacetrack Report #3" (1980)
/// and Vallado, Crawford, Hujsak & Kelso, "Revisiting Spacetrack Report #3", AIAA 2006-6753, in the
/// "improved" operation mode of that revision (sidereal time of the epoch by the IAU-82 expression,
/// no forced positive node in the Lyddane branch). Output: TEME position [km] and velocity [km/s].
#include <string>

#include "zen/error.hpp"
#include "zen/orbit/orbit.hpp"
#include "zen/orbit/tle.hpp"

namespace zen::orbit {

/// Earth constants used by SGP4. WGS-72 (default) is what the element sets are fitted with and what
/// the published verification output uses.
enum class GravityModel { Wgs72, Wgs84 };

/// A propagation failure of SGP4 (codes of the 2006 revision):
///   1 mean elements out of range: e >= 1, e < -0.001 or a < 0.95 earth radii
///   2 mean motion <= 0
///   3 perturbed eccentricity outside [0, 1] (deep space)
///   4 semi-latus rectum < 0
///   5 (reserved: "epoch elements sub-orbital", dropped in the 2006 revision; never raised)
///   6 satellite decayed: radius < 1 earth radius
/// Base code (zen::Error::code) is Result::InvalidArgument; code() here is the SGP4 code.
class Sgp4Error : public Error {
 public:
  Sgp4Error(int sgp4_code, const std::string& msg) : Error(Result::InvalidArgument, msg), sgp4_code_(sgp4_code) {}
  int code() const noexcept { return sgp4_code_; }
  Result result() const noexcept { return Error::code(); }

 private:
  int sgp4_code_;
};

class Sgp4 {
 public:
  /// Initialises the model (sgp4init). Throws zen::Error for non-finite elements, a mean motion <= 0
  /// or an eccentricity outside [0, 1).
  explicit Sgp4(const MeanElements& elements, GravityModel gravity = GravityModel::Wgs72);

  struct State {
    Vec3 r_km;    ///< TEME position [km]
    Vec3 v_km_s;  ///< TEME velocity [km/s]
  };

  /// State tsince minutes after the epoch (negative: before). Throws Sgp4Error (codes above).
  /// Thread-safe: the resonance integrator restarts from the epoch on every call.
  State propagate_minutes(double tsince) const;
  /// State at the UTC Julian date jd + frac.
  State propagate_jd(double jd, double frac) const;

  bool deep_space() const noexcept { return deep_; }
  /// 2 pi / n with n the un-Kozai'd (Brouwer) mean motion [min].
  double period_minutes() const noexcept;
  const MeanElements& elements() const noexcept { return elements_; }
  GravityModel gravity() const noexcept { return gravity_model_; }

 private:
  struct Gravity {
    double mu, radius_km, xke, j2, j3, j4, j3oj2;
  };
  // Lunar-solar periodic coefficients (dscom / dpper).
  struct Periodics {
    double e3, ee2, se2, se3, sgh2, sgh3, sgh4, sh2, sh3, si2, si3, sl2, sl3, sl4;
    double xgh2, xgh3, xgh4, xh2, xh3, xi2, xi3, xl2, xl3, xl4, zmol, zmos;
  };
  // Deep-space secular rates and resonance terms (dsinit / dspace).
  struct Resonance {
    int irez = 0;  // 0 none, 1 one-day (24 h), 2 half-day (12 h)
    double d2201 = 0, d2211 = 0, d3210 = 0, d3222 = 0, d4410 = 0, d4422 = 0, d5220 = 0, d5232 = 0,
           d5421 = 0, d5433 = 0;
    double del1 = 0, del2 = 0, del3 = 0, xfact = 0, xlamo = 0;
    double dedt = 0, didt = 0, dmdt = 0, dnodt = 0, domdt = 0;
  };
  struct Perturbed {
    double ep, inclp, nodep, argpp, mp;
  };

  void init();
  void deep_space_init(double epoch);
  void lunar_solar_periodics(double t, Perturbed& p) const;
  [[noreturn]] void fail(int code, double tsince, const std::string& what) const;

  MeanElements elements_;
  GravityModel gravity_model_;
  Gravity g_{};
  bool deep_ = false;
  bool simple_ = false;  // isimp: perigee below 220 km drops the higher-order drag terms

  // Mean elements at epoch [rad, rad/min].
  double ecco_ = 0, inclo_ = 0, nodeo_ = 0, argpo_ = 0, mo_ = 0, no_kozai_ = 0, no_ = 0, bstar_ = 0;
  double gsto_ = 0;
  // Near-Earth coefficients.
  double aycof_ = 0, con41_ = 0, cc1_ = 0, cc4_ = 0, cc5_ = 0, d2_ = 0, d3_ = 0, d4_ = 0, delmo_ = 0, eta_ = 0;
  double argpdot_ = 0, omgcof_ = 0, sinmao_ = 0, t2cof_ = 0, t3cof_ = 0, t4cof_ = 0, t5cof_ = 0;
  double x1mth2_ = 0, x7thm1_ = 0, mdot_ = 0, nodedot_ = 0, xlcof_ = 0, xmcof_ = 0, nodecf_ = 0;
  Periodics ls_{};
  Resonance rz_{};
};

}  // namespace zen::orbit
