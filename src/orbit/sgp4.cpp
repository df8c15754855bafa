// SGP4 / SDP4 written from the published equations:
//   F. R. Hoots, R. L. Roehrich, "Models for Propagation of NORAD Element Sets", Spacetrack Report #3
//   (1980), and D. A. Vallado, P. Crawford, R. Hujsak, T. S. Kelso, "Revisiting Spacetrack Report #3",
//   AIAA 2006-6753 (the corrected deep-space integrator, Lyddane choice, perigee / drag fixes and error
//   codes), in its "improved" operation mode. Variable names follow the symbols of those documents.
// This file: the near-Earth model (initialisation, propagation); the deep-space terms are in
// sgp4_deep.cpp.
#include "zen/orbit/sgp4.hpp"

#include <cmath>
#include <cstdio>

#include "sgp4_terms.hpp"

namespace zen::orbit {
using namespace sgp4_terms;

void Sgp4::fail(int code, double tsince, const std::string& what) const {
  char t[64];
  std::snprintf(t, sizeof(t), "%.6f", tsince);
  std::string sat = "satellite " + (elements_.catalog.empty() ? std::to_string(elements_.catalog_number)
                                                                : elements_.catalog);
  if (!elements_.name.empty()) sat += " (" + elements_.name + ")";
  throw Sgp4Error(code, "SGP4 error " + std::to_string(code) + " for " + sat + " at tsince = " + t +
                            " min: " + what);
}

Sgp4::Sgp4(const MeanElements& elements, GravityModel gravity) : elements_(elements), gravity_model_(gravity) {
  const MeanElements& e = elements_;
  const std::string who = "Sgp4: satellite " + e.catalog + (e.name.empty() ? "" : " (" + e.name + ")") + ": ";
  ZEN_ENFORCE(std::isfinite(e.mean_motion_rev_per_day) && e.mean_motion_rev_per_day > 0.0,
              who + "mean motion must be positive, got " + std::to_string(e.mean_motion_rev_per_day));
  ZEN_ENFORCE(std::isfinite(e.eccentricity) && e.eccentricity >= 0.0 && e.eccentricity < 1.0,
              who + "eccentricity must be in [0, 1), got " + std::to_string(e.eccentricity));
  ZEN_ENFORCE(std::isfinite(e.inclination_deg) && std::isfinite(e.raan_deg) && std::isfinite(e.arg_perigee_deg) &&
                  std::isfinite(e.mean_anomaly_deg) && std::isfinite(e.bstar) && std::isfinite(e.epoch_jd) &&
                  std::isfinite(e.epoch_jd_frac),
              who + "non-finite element");
  if (gravity == GravityModel::Wgs72) {
    g_.mu = 398600.8;
    g_.radius_km = 6378.135;
    g_.j2 = 0.001082616;
    g_.j3 = -0.00000253881;
    g_.j4 = -0.00000165597;
  } else {
    g_.mu = 398600.5;
    g_.radius_km = 6378.137;
    g_.j2 = 0.00108262998905;
    g_.j3 = -0.00000253215306;
    g_.j4 = -0.00000161098761;
  }
  // ke = sqrt(mu) in earth radii^1.5 per minute.
  g_.xke = 60.0 / std::sqrt(g_.radius_km * g_.radius_km * g_.radius_km / g_.mu);
  g_.j3oj2 = g_.j3 / g_.j2;

  no_kozai_ = e.mean_motion_rev_per_day * kTwoPi / 1440.0;
  ecco_ = e.eccentricity;
  inclo_ = e.inclination_deg * kDegToRad;
  nodeo_ = e.raan_deg * kDegToRad;
  argpo_ = e.arg_perigee_deg * kDegToRad;
  mo_ = e.mean_anomaly_deg * kDegToRad;
  bstar_ = e.bstar;
  init();
}

double Sgp4::period_minutes() const noexcept { return kTwoPi / no_; }

void Sgp4::init() {
  const double re = g_.radius_km, xke = g_.xke, j2 = g_.j2;

  // --- Recover the Brouwer mean motion and semi-major axis from the Kozai mean motion (initl).
  const double eccsq = ecco_ * ecco_;
  const double omeosq = 1.0 - eccsq;
  const double rteosq = std::sqrt(omeosq);
  const double cosio = std::cos(inclo_);
  const double cosio2 = cosio * cosio;
  const double ak = std::pow(xke / no_kozai_, kX2o3);
  const double d1 = 0.75 * j2 * (3.0 * cosio2 - 1.0) / (rteosq * omeosq);
  double del = d1 / (ak * ak);
  const double adel = ak * (1.0 - del * del - del * (1.0 / 3.0 + 134.0 * del * del / 81.0));
  del = d1 / (adel * adel);
  no_ = no_kozai_ / (1.0 + del);
  const double ao = std::pow(xke / no_, kX2o3);
  const double sinio = std::sin(inclo_);
  const double po = ao * omeosq;
  const double con42 = 1.0 - 5.0 * cosio2;
  con41_ = -con42 - cosio2 - cosio2;
  const double posq = po * po;
  const double rp = ao * (1.0 - ecco_);
  // Epoch in days since 1950 January 0.0 UTC; GMST of the epoch (improved mode: IAU-82). The epoch
  // enters only the sidereal angle and the lunar-solar arguments; it is formed as one double Julian
  // date, as the reference implementation that produced the verification output does (the rounding,
  // ~2e-10 day, moves a highly eccentric deep-space state by a few millimetres).
  const double epoch_total = elements_.epoch_jd + elements_.epoch_jd_frac;
  const double epoch = epoch_total - 2433281.5;
  gsto_ = gmst_rad(epoch + 2433281.5);

  // --- Drag and secular coefficients.
  const double ss = 78.0 / re + 1.0;
  const double qzms2t = std::pow((120.0 - 78.0) / re, 4);
  simple_ = rp < 220.0 / re + 1.0;
  double sfour = ss, qzms24 = qzms2t;
  const double perige = (rp - 1.0) * re;
  if (perige < 156.0) {  // perigee below 156 km: modified s and (q0 - s)^4
    sfour = perige - 78.0;
    if (perige < 98.0) sfour = 20.0;
    qzms24 = std::pow((120.0 - sfour) / re, 4);
    sfour = sfour / re + 1.0;
  }
  const double pinvsq = 1.0 / posq;
  const double tsi = 1.0 / (ao - sfour);
  eta_ = ao * ecco_ * tsi;
  const double etasq = eta_ * eta_;
  const double eeta = ecco_ * eta_;
  const double psisq = std::fabs(1.0 - etasq);
  const double coef = qzms24 * std::pow(tsi, 4);
  const double coef1 = coef / std::pow(psisq, 3.5);
  const double cc2 = coef1 * no_ *
                     (ao * (1.0 + 1.5 * etasq + eeta * (4.0 + etasq)) +
                      0.375 * j2 * tsi / psisq * con41_ * (8.0 + 3.0 * etasq * (8.0 + etasq)));
  cc1_ = bstar_ * cc2;
  double cc3 = 0.0;
  if (ecco_ > 1.0e-4) cc3 = -2.0 * coef * tsi * g_.j3oj2 * no_ * sinio / ecco_;
  x1mth2_ = 1.0 - cosio2;
  cc4_ = 2.0 * no_ * coef1 * ao * omeosq *
         (eta_ * (2.0 + 0.5 * etasq) + ecco_ * (0.5 + 2.0 * etasq) -
          j2 * tsi / (ao * psisq) *
              (-3.0 * con41_ * (1.0 - 2.0 * eeta + etasq * (1.5 - 0.5 * eeta)) +
               0.75 * x1mth2_ * (2.0 * etasq - eeta * (1.0 + etasq)) * std::cos(2.0 * argpo_)));
  cc5_ = 2.0 * coef1 * ao * omeosq * (1.0 + 2.75 * (etasq + eeta) + eeta * etasq);
  const double cosio4 = cosio2 * cosio2;
  const double temp1 = 1.5 * j2 * pinvsq * no_;
  const double temp2 = 0.5 * temp1 * j2 * pinvsq;
  const double temp3 = -0.46875 * g_.j4 * pinvsq * pinvsq * no_;
  mdot_ = no_ + 0.5 * temp1 * rteosq * con41_ + 0.0625 * temp2 * rteosq * (13.0 - 78.0 * cosio2 + 137.0 * cosio4);
  argpdot_ = -0.5 * temp1 * con42 + 0.0625 * temp2 * (7.0 - 114.0 * cosio2 + 395.0 * cosio4) +
             temp3 * (3.0 - 36.0 * cosio2 + 49.0 * cosio4);
  const double xhdot1 = -temp1 * cosio;
  nodedot_ = xhdot1 + (0.5 * temp2 * (4.0 - 19.0 * cosio2) + 2.0 * temp3 * (3.0 - 7.0 * cosio2)) * cosio;
  omgcof_ = bstar_ * cc3 * std::cos(argpo_);
  xmcof_ = 0.0;
  if (ecco_ > 1.0e-4) xmcof_ = -kX2o3 * coef * bstar_ / eeta;
  nodecf_ = 3.5 * omeosq * xhdot1 * cc1_;
  t2cof_ = 1.5 * cc1_;
  // Long-period coefficients; 1 + cos i is guarded against zero (retrograde equatorial orbits).
  const double onepc = std::fabs(cosio + 1.0) > 1.5e-12 ? (1.0 + cosio) : 1.5e-12;
  xlcof_ = -0.25 * g_.j3oj2 * sinio * (3.0 + 5.0 * cosio) / onepc;
  aycof_ = -0.5 * g_.j3oj2 * sinio;
  delmo_ = std::pow(1.0 + eta_ * std::cos(mo_), 3);
  sinmao_ = std::sin(mo_);
  x7thm1_ = 7.0 * cosio2 - 1.0;

  // --- Deep space: period of 225 minutes or more.
  if (kTwoPi / no_ >= 225.0) {
    deep_ = true;
    simple_ = true;
    deep_space_init(epoch);
  }

  if (!simple_) {
    const double cc1sq = cc1_ * cc1_;
    d2_ = 4.0 * ao * tsi * cc1sq;
    const double temp = d2_ * tsi * cc1_ / 3.0;
    d3_ = (17.0 * ao + sfour) * temp;
    d4_ = 0.5 * temp * ao * tsi * (221.0 * ao + 31.0 * sfour) * cc1_;
    t3cof_ = d2_ + 2.0 * cc1sq;
    t4cof_ = 0.25 * (3.0 * d3_ + cc1_ * (12.0 * d2_ + 10.0 * cc1sq));
    t5cof_ = 0.2 * (3.0 * d4_ + 12.0 * cc1_ * d3_ + 6.0 * d2_ * d2_ + 15.0 * cc1sq * (2.0 * d2_ + cc1sq));
  }
}

Sgp4::State Sgp4::propagate_minutes(double t) const {
  ZEN_ENFORCE(std::isfinite(t), "Sgp4::propagate_minutes: tsince is not finite");
  const double xke = g_.xke, j2 = g_.j2;
  const double vkmpersec = g_.radius_km * xke / 60.0;

  // --- Secular gravity and atmospheric drag.
  const double xmdf = mo_ + mdot_ * t;
  const double argpdf = argpo_ + argpdot_ * t;
  const double nodedf = nodeo_ + nodedot_ * t;
  double argpm = argpdf;
  double mm = xmdf;
  const double t2 = t * t;
  double nodem = nodedf + nodecf_ * t2;
  double tempa = 1.0 - cc1_ * t;
  double tempe = bstar_ * cc4_ * t;
  double templ = t2cof_ * t2;
  if (!simple_) {
    const double delomg = omgcof_ * t;
    const double delm = xmcof_ * (std::pow(1.0 + eta_ * std::cos(xmdf), 3) - delmo_);
    const double temp = delomg + delm;
    mm = xmdf + temp;
    argpm = argpdf - temp;
    const double t3 = t2 * t, t4 = t3 * t;
    tempa = tempa - d2_ * t2 - d3_ * t3 - d4_ * t4;
    tempe = tempe + bstar_ * cc5_ * (std::sin(mm) - sinmao_);
    templ = templ + t3cof_ * t3 + t4 * (t4cof_ + t * t5cof_);
  }
  double nm = no_;
  double em = ecco_;
  double inclm = inclo_;

  // --- Deep-space secular effects and resonances (DSPACE).
  if (deep_) {
    const Resonance& r = rz_;
    const double theta = wrap(gsto_ + t * kRptim);
    em += r.dedt * t;
    inclm += r.didt * t;
    argpm += r.domdt * t;
    nodem += r.dnodt * t;
    mm += r.dmdt * t;
    if (r.irez != 0) {
      // Fixed-step (720 min) second-order integration of the resonance from the epoch, then a
      // Taylor step to t. Restarting from the epoch on every call gives the same sequence of steps
      // as the cached integrator of the 2006 code, so results do not depend on earlier calls.
      constexpr double fasx2 = 0.13130908, fasx4 = 2.8843198, fasx6 = 0.37448087;
      constexpr double g22 = 5.7686396, g32 = 0.95240898, g44 = 1.8014998, g52 = 1.0508330, g54 = 4.4108898;
      constexpr double stepp = 720.0, step2 = 259200.0;
      const double delt = t > 0.0 ? stepp : -stepp;
      double atime = 0.0, xni = no_, xli = r.xlamo;
      double xndt = 0.0, xldot = 0.0, xnddt = 0.0, ft = 0.0;
      for (;;) {
        if (r.irez != 2) {
          xndt = r.del1 * std::sin(xli - fasx2) + r.del2 * std::sin(2.0 * (xli - fasx4)) +
                 r.del3 * std::sin(3.0 * (xli - fasx6));
          xldot = xni + r.xfact;
          xnddt = r.del1 * std::cos(xli - fasx2) + 2.0 * r.del2 * std::cos(2.0 * (xli - fasx4)) +
                  3.0 * r.del3 * std::cos(3.0 * (xli - fasx6));
          xnddt *= xldot;
        } else {
          const double xomi = argpo_ + argpdot_ * atime;
          const double x2omi = xomi + xomi;
          const double x2li = xli + xli;
          xndt = r.d2201 * std::sin(x2omi + xli - g22) + r.d2211 * std::sin(xli - g22) +
                 r.d3210 * std::sin(xomi + xli - g32) + r.d3222 * std::sin(-xomi + xli - g32) +
                 r.d4410 * std::sin(x2omi + x2li - g44) + r.d4422 * std::sin(x2li - g44) +
                 r.d5220 * std::sin(xomi + xli - g52) + r.d5232 * std::sin(-xomi + xli - g52) +
                 r.d5421 * std::sin(xomi + x2li - g54) + r.d5433 * std::sin(-xomi + x2li - g54);
          xldot = xni + r.xfact;
          xnddt = r.d2201 * std::cos(x2omi + xli - g22) + r.d2211 * std::cos(xli - g22) +
                  r.d3210 * std::cos(xomi + xli - g32) + r.d3222 * std::cos(-xomi + xli - g32) +
                  r.d5220 * std::cos(xomi + xli - g52) + r.d5232 * std::cos(-xomi + xli - g52) +
                  2.0 * (r.d4410 * std::cos(x2omi + x2li - g44) + r.d4422 * std::cos(x2li - g44) +
                         r.d5421 * std::cos(xomi + x2li - g54) + r.d5433 * std::cos(-xomi + x2li - g54));
          xnddt *= xldot;
        }
        if (std::fabs(t - atime) >= stepp) {
          xli += xldot * delt + xndt * step2;
          xni += xndt * delt + xnddt * step2;
          atime += delt;
        } else {
          ft = t - atime;
          break;
        }
      }
      nm = xni + xndt * ft + xnddt * ft * ft * 0.5;
      const double xl = xli + xldot * ft + xndt * ft * ft * 0.5;
      if (r.irez != 1)
        mm = xl - 2.0 * nodem + 2.0 * theta;
      else
        mm = xl - nodem - argpm + theta;
      nm = no_ + (nm - no_);
    }
  }

  if (nm <= 0.0) fail(2, t, "mean motion " + std::to_string(nm) + " rad/min is not positive");
  const double am = std::pow(xke / nm, kX2o3) * tempa * tempa;
  nm = xke / std::pow(am, 1.5);
  em -= tempe;
  if (em >= 1.0 || em < -0.001 || am < 0.95)
    fail(1, t, "mean elements out of range: eccentricity " + std::to_string(em) + " (valid -0.001..1), a = " +
                   std::to_string(am) + " earth radii (valid >= 0.95)");
  if (em < 1.0e-6) em = 1.0e-6;
  mm += no_ * templ;
  double xlm = mm + argpm + nodem;
  nodem = wrap(nodem);
  argpm = wrap(argpm);
  xlm = wrap(xlm);
  mm = wrap(xlm - argpm - nodem);

  // --- Lunar-solar periodics.
  Perturbed p{em, inclm, nodem, argpm, mm};
  double aycof = aycof_, xlcof = xlcof_, con41 = con41_, x1mth2 = x1mth2_, x7thm1 = x7thm1_;
  if (deep_) {
    lunar_solar_periodics(t, p);
    if (p.inclp < 0.0) {
      p.inclp = -p.inclp;
      p.nodep += kPi;
      p.argpp -= kPi;
    }
    if (p.ep < 0.0 || p.ep > 1.0)
      fail(3, t, "perturbed eccentricity " + std::to_string(p.ep) + " outside [0, 1]");
  }
  const double sinip = std::sin(p.inclp), cosip = std::cos(p.inclp);
  if (deep_) {
    aycof = -0.5 * g_.j3oj2 * sinip;
    const double onepc = std::fabs(cosip + 1.0) > 1.5e-12 ? (1.0 + cosip) : 1.5e-12;
    xlcof = -0.25 * g_.j3oj2 * sinip * (3.0 + 5.0 * cosip) / onepc;
  }

  // --- Long-period periodics.
  const double axnl = p.ep * std::cos(p.argpp);
  double temp = 1.0 / (am * (1.0 - p.ep * p.ep));
  const double aynl = p.ep * std::sin(p.argpp) + temp * aycof;
  const double xl = p.mp + p.argpp + p.nodep + temp * xlcof * axnl;

  // --- Kepler's equation in the equinoctial variables (Newton-Raphson, step clamped to 0.95).
  const double u = wrap(xl - p.nodep);
  double eo1 = u, tem5 = 9999.9, sineo1 = 0.0, coseo1 = 0.0;
  for (int ktr = 1; std::fabs(tem5) >= 1.0e-12 && ktr <= 10; ++ktr) {
    sineo1 = std::sin(eo1);
    coseo1 = std::cos(eo1);
    tem5 = 1.0 - coseo1 * axnl - sineo1 * aynl;
    tem5 = (u - aynl * coseo1 + axnl * sineo1 - eo1) / tem5;
    if (std::fabs(tem5) >= 0.95) tem5 = tem5 > 0.0 ? 0.95 : -0.95;
    eo1 += tem5;
  }

  // --- Short-period periodics.
  const double ecose = axnl * coseo1 + aynl * sineo1;
  const double esine = axnl * sineo1 - aynl * coseo1;
  const double el2 = axnl * axnl + aynl * aynl;
  const double pl = am * (1.0 - el2);
  if (pl < 0.0) fail(4, t, "semi-latus rectum " + std::to_string(pl) + " earth radii is negative");
  const double rl = am * (1.0 - ecose);
  const double rdotl = std::sqrt(am) * esine / rl;
  const double rvdotl = std::sqrt(pl) / rl;
  const double betal = std::sqrt(1.0 - el2);
  temp = esine / (1.0 + betal);
  const double sinu = am / rl * (sineo1 - aynl - axnl * temp);
  const double cosu = am / rl * (coseo1 - axnl + aynl * temp);
  double su = std::atan2(sinu, cosu);
  const double sin2u = (cosu + cosu) * sinu;
  const double cos2u = 1.0 - 2.0 * sinu * sinu;
  temp = 1.0 / pl;
  const double temp1 = 0.5 * j2 * temp;
  const double temp2 = temp1 * temp;
  if (deep_) {
    const double cosisq = cosip * cosip;
    con41 = 3.0 * cosisq - 1.0;
    x1mth2 = 1.0 - cosisq;
    x7thm1 = 7.0 * cosisq - 1.0;
  }
  const double mrt = rl * (1.0 - 1.5 * temp2 * betal * con41) + 0.5 * temp1 * x1mth2 * cos2u;
  su -= 0.25 * temp2 * x7thm1 * sin2u;
  const double xnode = p.nodep + 1.5 * temp2 * cosip * sin2u;
  const double xinc = p.inclp + 1.5 * temp2 * cosip * sinip * cos2u;
  const double mvt = rdotl - nm * temp1 * x1mth2 * sin2u / xke;
  const double rvdot = rvdotl + nm * temp1 * (x1mth2 * cos2u + 1.5 * con41) / xke;

  // --- Orientation vectors and the state.
  const double sinsu = std::sin(su), cossu = std::cos(su);
  const double snod = std::sin(xnode), cnod = std::cos(xnode);
  const double sini = std::sin(xinc), cosi = std::cos(xinc);
  const double xmx = -snod * cosi, xmy = cnod * cosi;
  const Vec3 uv(xmx * sinsu + cnod * cossu, xmy * sinsu + snod * cossu, sini * sinsu);
  const Vec3 vv(xmx * cossu - cnod * sinsu, xmy * cossu - snod * sinsu, sini * cossu);
  if (mrt < 1.0)
    fail(6, t, "satellite decayed: radius " + std::to_string(mrt) + " earth radii is below 1");
  State s;
  s.r_km = (mrt * g_.radius_km) * uv;
  s.v_km_s = (mvt * uv + rvdot * vv) * vkmpersec;
  return s;
}

Sgp4::State Sgp4::propagate_jd(double jd, double frac) const {
  const double tsince = ((jd - elements_.epoch_jd) + (frac - elements_.epoch_jd_frac)) * 1440.0;
  return propagate_minutes(tsince);
}

}  // namespace zen::orbit
