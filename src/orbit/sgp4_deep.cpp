// SDP4, the deep-space half of the SGP4 / SDP4 propagator (sgp4.cpp has the near-Earth half):
// the lunar-solar secular rates and resonance coefficients at initialisation (DSCOM, DSINIT) and
// the lunar-solar periodics (DPPER), written from the equations of Spacetrack Report #3 (Hoots,
// Roehrich 1980) as corrected in "Revisiting Spacetrack Report #3" (Vallado et al., AIAA 2006-6753).
#include <cmath>

#include "sgp4_terms.hpp"
#include "zen/orbit/sgp4.hpp"

namespace zen::orbit {
using namespace sgp4_terms;

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

}  // namespace zen::orbit
