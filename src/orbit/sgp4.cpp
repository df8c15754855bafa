// SGP4 / SDP4 written from the published equations:
//   F. R. Hoots, R. L. Roehrich, "Models for Propagation of NORAD Element Sets", Spacetrack Report #3
//   (1980), and D. A. Vallado, P. Crawford, R. Hujsak, T. S. Kelso, "Revisiting Spacetrack Report #3",
//   AIAA 2006-6753 (the corrected deep-space integrator, Lyddane choice, perigee / drag fixes and error
//   codes), in its "improved" operation mode. Variable names follow the symbols of those documents.
#include "zen/orbit/sgp4.hpp"

#include <cmath>
#include <cstdio>

namespace zen::orbit {
namespace {

constexpr double kX2o3 = 2.0 / 3.0;
// Lunar and solar constants of the deep-space theory (Spacetrack Report #3, DEEP).
constexpr double kZes = 0.01675, kZel = 0.05490;       // solar / lunar eccentricity
constexpr double kZns = 1.19459e-5, kZnl = 1.5835218e-4;  // solar / lunar mean motion [rad/min]
constexpr double kRptim = 4.37526908801129966e-3;      // Earth rotation [rad/min]

double wrap(double x) { return std::fmod(x, kTwoPi); }  // C fmod semantics: keeps the sign

}  // namespace

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

// Lunar-solar terms common to the periodics and the secular rates (DSCOM), then the secular rates
// and resonance coefficients (DSINIT).
void Sgp4::deep_space_init(double epoch) {
  // Solar constants.
  constexpr double c1ss = 2.9864797e-6, c1l = 4.7968065e-7;
  constexpr double zsinis = 0.39785416, zcosis = 0.91744867, zcosgs = 0.1945905, zsings = -0.98088458;

  const double nm = no_, em = ecco_;
  const double snodm = std::sin(nodeo_), cnodm = std::cos(nodeo_);
  const double sinomm = std::sin(argpo_), cosomm = std::cos(argpo_);
  const double sinim = std::sin(inclo_), cosim = std::cos(inclo_);
  const double emsq = em * em;
  const double betasq = 1.0 - emsq;
  const double rtemsq = std::sqrt(betasq);

  // Lunar orbit at the epoch (days since 1900 January 0.5).
  const double day = epoch + 18261.5;
  const double xnodce = wrap(4.5236020 - 9.2422029e-4 * day);
  const double stem = std::sin(xnodce), ctem = std::cos(xnodce);
  const double zcosil = 0.91375164 - 0.03568096 * ctem;
  const double zsinil = std::sqrt(1.0 - zcosil * zcosil);
  const double zsinhl = 0.089683511 * stem / zsinil;
  const double zcoshl = std::sqrt(1.0 - zsinhl * zsinhl);
  const double gam = 5.8351514 + 0.0019443680 * day;
  double zx = 0.39785416 * stem / zsinil;
  const double zy = zcoshl * ctem + 0.91744867 * zsinhl * stem;
  zx = std::atan2(zx, zy);
  zx = gam + zx - xnodce;
  const double zcosgl = std::cos(zx), zsingl = std::sin(zx);

  // The same terms for the Sun (index 0) and the Moon (index 1).
  struct Terms {
    double s1, s2, s3, s4, s5, s6, s7;
    double z1, z2, z3, z11, z12, z13, z21, z22, z23, z31, z32, z33;
  } body[2];
  double zcosg = zcosgs, zsing = zsings, zcosi = zcosis, zsini = zsinis, zcosh = cnodm, zsinh = snodm, cc = c1ss;
  const double xnoi = 1.0 / nm;
  for (int b = 0; b < 2; ++b) {
    Terms& k = body[b];
    const double a1 = zcosg * zcosh + zsing * zcosi * zsinh;
    const double a3 = -zsing * zcosh + zcosg * zcosi * zsinh;
    const double a7 = -zcosg * zsinh + zsing * zcosi * zcosh;
    const double a8 = zsing * zsini;
    const double a9 = zsing * zsinh + zcosg * zcosi * zcosh;
    const double a10 = zcosg * zsini;
    const double a2 = cosim * a7 + sinim * a8;
    const double a4 = cosim * a9 + sinim * a10;
    const double a5 = -sinim * a7 + cosim * a8;
    const double a6 = -sinim * a9 + cosim * a10;
    const double x1 = a1 * cosomm + a2 * sinomm;
    const double x2 = a3 * cosomm + a4 * sinomm;
    const double x3 = -a1 * sinomm + a2 * cosomm;
    const double x4 = -a3 * sinomm + a4 * cosomm;
    const double x5 = a5 * sinomm;
    const double x6 = a6 * sinomm;
    const double x7 = a5 * cosomm;
    const double x8 = a6 * cosomm;
    k.z31 = 12.0 * x1 * x1 - 3.0 * x3 * x3;
    k.z32 = 24.0 * x1 * x2 - 6.0 * x3 * x4;
    k.z33 = 12.0 * x2 * x2 - 3.0 * x4 * x4;
    k.z1 = 3.0 * (a1 * a1 + a2 * a2) + k.z31 * emsq;
    k.z2 = 6.0 * (a1 * a3 + a2 * a4) + k.z32 * emsq;
    k.z3 = 3.0 * (a3 * a3 + a4 * a4) + k.z33 * emsq;
    k.z11 = -6.0 * a1 * a5 + emsq * (-24.0 * x1 * x7 - 6.0 * x3 * x5);
    k.z12 = -6.0 * (a1 * a6 + a3 * a5) + emsq * (-24.0 * (x2 * x7 + x1 * x8) - 6.0 * (x3 * x6 + x4 * x5));
    k.z13 = -6.0 * a3 * a6 + emsq * (-24.0 * x2 * x8 - 6.0 * x4 * x6);
    k.z21 = 6.0 * a2 * a5 + emsq * (24.0 * x1 * x5 - 6.0 * x3 * x7);
    k.z22 = 6.0 * (a4 * a5 + a2 * a6) + emsq * (24.0 * (x2 * x5 + x1 * x6) - 6.0 * (x4 * x7 + x3 * x8));
    k.z23 = 6.0 * a4 * a6 + emsq * (24.0 * x2 * x6 - 6.0 * x4 * x8);
    k.z1 = k.z1 + k.z1 + betasq * k.z31;
    k.z2 = k.z2 + k.z2 + betasq * k.z32;
    k.z3 = k.z3 + k.z3 + betasq * k.z33;
    k.s3 = cc * xnoi;
    k.s2 = -0.5 * k.s3 / rtemsq;
    k.s4 = k.s3 * rtemsq;
    k.s1 = -15.0 * em * k.s4;
    k.s5 = x1 * x3 + x2 * x4;
    k.s6 = x2 * x3 + x1 * x4;
    k.s7 = x2 * x4 - x1 * x3;
    // Switch to the Moon.
    zcosg = zcosgl;
    zsing = zsingl;
    zcosi = zcosil;
    zsini = zsinil;
    zcosh = zcoshl * cnodm + zsinhl * snodm;
    zsinh = snodm * zcoshl - cnodm * zsinhl;
    cc = c1l;
  }
  const Terms& s = body[0];  // Sun
  const Terms& l = body[1];  // Moon
  ls_.zmol = wrap(4.7199672 + 0.22997150 * day - gam);
  ls_.zmos = wrap(6.2565837 + 0.017201977 * day);
  // Solar periodic coefficients.
  ls_.se2 = 2.0 * s.s1 * s.s6;
  ls_.se3 = 2.0 * s.s1 * s.s7;
  ls_.si2 = 2.0 * s.s2 * s.z12;
  ls_.si3 = 2.0 * s.s2 * (s.z13 - s.z11);
  ls_.sl2 = -2.0 * s.s3 * s.z2;
  ls_.sl3 = -2.0 * s.s3 * (s.z3 - s.z1);
  ls_.sl4 = -2.0 * s.s3 * (-21.0 - 9.0 * emsq) * kZes;
  ls_.sgh2 = 2.0 * s.s4 * s.z32;
  ls_.sgh3 = 2.0 * s.s4 * (s.z33 - s.z31);
  ls_.sgh4 = -18.0 * s.s4 * kZes;
  ls_.sh2 = -2.0 * s.s2 * s.z22;
  ls_.sh3 = -2.0 * s.s2 * (s.z23 - s.z21);
  // Lunar periodic coefficients.
  ls_.ee2 = 2.0 * l.s1 * l.s6;
  ls_.e3 = 2.0 * l.s1 * l.s7;
  ls_.xi2 = 2.0 * l.s2 * l.z12;
  ls_.xi3 = 2.0 * l.s2 * (l.z13 - l.z11);
  ls_.xl2 = -2.0 * l.s3 * l.z2;
  ls_.xl3 = -2.0 * l.s3 * (l.z3 - l.z1);
  ls_.xl4 = -2.0 * l.s3 * (-21.0 - 9.0 * emsq) * kZel;
  ls_.xgh2 = 2.0 * l.s4 * l.z32;
  ls_.xgh3 = 2.0 * l.s4 * (l.z33 - l.z31);
  ls_.xgh4 = -18.0 * l.s4 * kZel;
  ls_.xh2 = -2.0 * l.s2 * l.z22;
  ls_.xh3 = -2.0 * l.s2 * (l.z23 - l.z21);

  // --- DSINIT: secular rates from the Sun and the Moon.
  Resonance& r = rz_;
  r.irez = 0;
  if (nm > 0.0034906585 && nm < 0.0052359877) r.irez = 1;               // ~1 rev/day: synchronous
  if (nm >= 8.26e-3 && nm <= 9.24e-3 && em >= 0.5) r.irez = 2;           // ~2 rev/day, eccentric
  const double ses = s.s1 * kZns * s.s5;
  const double sis = s.s2 * kZns * (s.z11 + s.z13);
  const double sls = -kZns * s.s3 * (s.z1 + s.z3 - 14.0 - 6.0 * emsq);
  const double sghs = s.s4 * kZns * (s.z31 + s.z33 - 6.0);
  double shs = -kZns * s.s2 * (s.z21 + s.z23);
  const double near_equatorial = 5.2359877e-2;  // 3 degrees
  const double inclm = inclo_;
  if (inclm < near_equatorial || inclm > kPi - near_equatorial) shs = 0.0;
  if (sinim != 0.0) shs /= sinim;
  const double sgs = sghs - cosim * shs;
  r.dedt = ses + l.s1 * kZnl * l.s5;
  r.didt = sis + l.s2 * kZnl * (l.z11 + l.z13);
  r.dmdt = sls - kZnl * l.s3 * (l.z1 + l.z3 - 14.0 - 6.0 * emsq);
  const double sghl = l.s4 * kZnl * (l.z31 + l.z33 - 6.0);
  double shll = -kZnl * l.s2 * (l.z21 + l.z23);
  if (inclm < near_equatorial || inclm > kPi - near_equatorial) shll = 0.0;
  r.domdt = sgs + sghl;
  r.dnodt = shs;
  if (sinim != 0.0) {
    r.domdt -= cosim / sinim * shll;
    r.dnodt += shll / sinim;
  }

  // --- Resonance terms.
  if (r.irez == 0) return;
  const double theta = wrap(gsto_);
  const double aonv = std::pow(nm / g_.xke, kX2o3);
  if (r.irez == 2) {
    // Half-day resonance: the G functions are polynomial fits in e (Hujsak).
    const double cosisq = cosim * cosim;
    const double e = ecco_, esq = e * e, eoc = e * esq;
    const double g201 = -0.306 - (e - 0.64) * 0.440;
    double g211, g310, g322, g410, g422, g520, g521, g532, g533;
    if (e <= 0.65) {
      g211 = 3.616 - 13.2470 * e + 16.2900 * esq;
      g310 = -19.302 + 117.3900 * e - 228.4190 * esq + 156.5910 * eoc;
      g322 = -18.9068 + 109.7927 * e - 214.6334 * esq + 146.5816 * eoc;
      g410 = -41.122 + 242.6940 * e - 471.0940 * esq + 313.9530 * eoc;
      g422 = -146.407 + 841.8800 * e - 1629.014 * esq + 1083.4350 * eoc;
      g520 = -532.114 + 3017.977 * e - 5740.032 * esq + 3708.2760 * eoc;
    } else {
      g211 = -72.099 + 331.819 * e - 508.738 * esq + 266.724 * eoc;
      g310 = -346.844 + 1582.851 * e - 2415.925 * esq + 1246.113 * eoc;
      g322 = -342.585 + 1554.908 * e - 2366.899 * esq + 1215.972 * eoc;
      g410 = -1052.797 + 4758.686 * e - 7193.992 * esq + 3651.957 * eoc;
      g422 = -3581.690 + 16178.110 * e - 24462.770 * esq + 12422.520 * eoc;
      if (e > 0.715)
        g520 = -5149.66 + 29936.92 * e - 54087.36 * esq + 31324.56 * eoc;
      else
        g520 = 1464.74 - 4664.75 * e + 3763.64 * esq;
    }
    if (e < 0.7) {
      g533 = -919.22770 + 4988.6100 * e - 9064.7700 * esq + 5542.21 * eoc;
      g521 = -822.71072 + 4568.6173 * e - 8491.4146 * esq + 5337.524 * eoc;
      g532 = -853.66600 + 4690.2500 * e - 8624.7700 * esq + 5341.4 * eoc;
    } else {
      g533 = -37995.780 + 161616.52 * e - 229838.20 * esq + 109377.94 * eoc;
      g521 = -51752.104 + 218913.95 * e - 309468.16 * esq + 146349.42 * eoc;
      g532 = -40023.880 + 170470.89 * e - 242699.48 * esq + 115605.82 * eoc;
    }
    const double sini2 = sinim * sinim;
    const double f220 = 0.75 * (1.0 + 2.0 * cosim + cosisq);
    const double f221 = 1.5 * sini2;
    const double f321 = 1.875 * sinim * (1.0 - 2.0 * cosim - 3.0 * cosisq);
    const double f322 = -1.875 * sinim * (1.0 + 2.0 * cosim - 3.0 * cosisq);
    const double f441 = 35.0 * sini2 * f220;
    const double f442 = 39.3750 * sini2 * sini2;
    const double f522 = 9.84375 * sinim *
                        (sini2 * (1.0 - 2.0 * cosim - 5.0 * cosisq) + 0.33333333 * (-2.0 + 4.0 * cosim + 6.0 * cosisq));
    const double f523 = sinim * (4.92187512 * sini2 * (-2.0 - 4.0 * cosim + 10.0 * cosisq) +
                                 6.56250012 * (1.0 + 2.0 * cosim - 3.0 * cosisq));
    const double f542 = 29.53125 * sinim * (2.0 - 8.0 * cosim + cosisq * (-12.0 + 8.0 * cosim + 10.0 * cosisq));
    const double f543 = 29.53125 * sinim * (-2.0 - 8.0 * cosim + cosisq * (12.0 + 8.0 * cosim - 10.0 * cosisq));
    constexpr double root22 = 1.7891679e-6, root32 = 3.7393792e-7, root44 = 7.3636953e-9,
                     root52 = 1.1428639e-7, root54 = 2.1765803e-9;
    const double xno2 = nm * nm, ainv2 = aonv * aonv;
    double t1 = 3.0 * xno2 * ainv2;
    double tt = t1 * root22;
    r.d2201 = tt * f220 * g201;
    r.d2211 = tt * f221 * g211;
    t1 *= aonv;
    tt = t1 * root32;
    r.d3210 = tt * f321 * g310;
    r.d3222 = tt * f322 * g322;
    t1 *= aonv;
    tt = 2.0 * t1 * root44;
    r.d4410 = tt * f441 * g410;
    r.d4422 = tt * f442 * g422;
    t1 *= aonv;
    tt = t1 * root52;
    r.d5220 = tt * f522 * g520;
    r.d5232 = tt * f523 * g532;
    tt = 2.0 * t1 * root54;
    r.d5421 = tt * f542 * g521;
    r.d5433 = tt * f543 * g533;
    r.xlamo = wrap(mo_ + nodeo_ + nodeo_ - theta - theta);
    r.xfact = mdot_ + r.dmdt + 2.0 * (nodedot_ + r.dnodt - kRptim) - no_;
  } else {
    // One-day (geosynchronous) resonance.
    constexpr double q22 = 1.7891679e-6, q31 = 2.1460748e-6, q33 = 2.2123015e-7;
    const double g200 = 1.0 + emsq * (-2.5 + 0.8125 * emsq);
    const double g310 = 1.0 + 2.0 * emsq;
    const double g300 = 1.0 + emsq * (-6.0 + 6.60937 * emsq);
    const double f220 = 0.75 * (1.0 + cosim) * (1.0 + cosim);
    const double f311 = 0.9375 * sinim * sinim * (1.0 + 3.0 * cosim) - 0.75 * (1.0 + cosim);
    const double f330 = 1.875 * std::pow(1.0 + cosim, 3);
    const double del1 = 3.0 * nm * nm * aonv * aonv;
    r.del2 = 2.0 * del1 * f220 * g200 * q22;
    r.del3 = 3.0 * del1 * f330 * g300 * q33 * aonv;
    r.del1 = del1 * f311 * g310 * q31 * aonv;
    r.xlamo = wrap(mo_ + nodeo_ + argpo_ - theta);
    const double xpidot = argpdot_ + nodedot_;
    r.xfact = mdot_ + xpidot - kRptim + r.dmdt + r.domdt + r.dnodt - no_;
  }
}

// Lunar-solar periodics (DPPER) added to the perturbed elements at t minutes from the epoch. (The
// 2006 revision evaluates but does not apply them at initialisation, so the epoch elements are used
// unchanged there and nothing is computed here for it.)
void Sgp4::lunar_solar_periodics(double t, Perturbed& p) const {
  const Periodics& c = ls_;
  auto phase = [](double zm, double ecc, double& sinzf, double& f2, double& f3) {
    const double zf = zm + 2.0 * ecc * std::sin(zm);
    sinzf = std::sin(zf);
    f2 = 0.5 * sinzf * sinzf - 0.25;
    f3 = -0.5 * sinzf * std::cos(zf);
  };
  double sinzf, f2, f3;
  phase(c.zmos + kZns * t, kZes, sinzf, f2, f3);
  const double ses = c.se2 * f2 + c.se3 * f3;
  const double sis = c.si2 * f2 + c.si3 * f3;
  const double sls = c.sl2 * f2 + c.sl3 * f3 + c.sl4 * sinzf;
  const double sghs = c.sgh2 * f2 + c.sgh3 * f3 + c.sgh4 * sinzf;
  const double shs = c.sh2 * f2 + c.sh3 * f3;
  phase(c.zmol + kZnl * t, kZel, sinzf, f2, f3);
  const double sel = c.ee2 * f2 + c.e3 * f3;
  const double sil = c.xi2 * f2 + c.xi3 * f3;
  const double sll = c.xl2 * f2 + c.xl3 * f3 + c.xl4 * sinzf;
  const double sghl = c.xgh2 * f2 + c.xgh3 * f3 + c.xgh4 * sinzf;
  const double shll = c.xh2 * f2 + c.xh3 * f3;
  const double pe = ses + sel;
  const double pinc = sis + sil;
  const double pl = sls + sll;
  double pgh = sghs + sghl;
  double ph = shs + shll;

  p.inclp += pinc;
  p.ep += pe;
  const double sinip = std::sin(p.inclp), cosip = std::cos(p.inclp);
  if (p.inclp >= 0.2) {
    ph /= sinip;
    pgh -= cosip * ph;
    p.argpp += pgh;
    p.nodep += ph;
    p.mp += pl;
  } else {
    // Low inclination: Lyddane's modification, applied to the non-singular variables
    // sin i sin node, sin i cos node and the mean longitude.
    const double sinop = std::sin(p.nodep), cosop = std::cos(p.nodep);
    double alfdp = sinip * sinop;
    double betdp = sinip * cosop;
    const double dalf = ph * cosop + pinc * cosip * sinop;
    const double dbet = -ph * sinop + pinc * cosip * cosop;
    alfdp += dalf;
    betdp += dbet;
    p.nodep = wrap(p.nodep);
    double xls = p.mp + p.argpp + cosip * p.nodep;
    const double dls = pl + pgh - pinc * p.nodep * sinip;
    xls += dls;
    const double xnoh = p.nodep;
    p.nodep = std::atan2(alfdp, betdp);
    // Keep the node on the branch of the previous value (the 2006 quadrant fix).
    if (std::fabs(xnoh - p.nodep) > kPi) p.nodep += (p.nodep < xnoh) ? kTwoPi : -kTwoPi;
    p.mp += pl;
    p.argpp = xls - p.mp - cosip * p.nodep;
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
