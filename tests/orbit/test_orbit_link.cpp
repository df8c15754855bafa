// Orbit module: link budget against hand-computed values and the reference table.
#include <cmath>

#include <gtest/gtest.h>

#include "zen/error.hpp"
#include "zen/orbit/link.hpp"

namespace zo = zen::orbit;

namespace {
// Hand computation: L = (4 pi f d / c)^2, SNR = P G G / (k T B L), R = B log2(1 + SNR).
double hand_rate(double f, double B, double P, double G, double T, double d) {
  const double pi = 3.14159265358979323846;
  const double L = std::pow(4 * pi * f * d / 3e8, 2);
  const double snr = P * G * G / (1.380649e-23 * T * B * L);
  return B * std::log2(1 + snr);
}
}  // namespace

TEST(Link, PresetsMatchHandComputation) {
  const zo::LinkPreset ka = zo::LinkPreset::ka(), s = zo::LinkPreset::s();
  EXPECT_NEAR(zo::to_db(ka.gain_tx), 32.1, 0.05);
  EXPECT_NEAR(zo::to_db(s.gain_tx), 7.0, 0.05);
  for (double d : {6406.9e3, 31020e3, 4435e3, 1695e3}) {
    EXPECT_NEAR(zo::rate_bps(ka, d), hand_rate(20e9, 500e6, 10, 1633, 354, d), 1e-6 * zo::rate_bps(ka, d));
    EXPECT_NEAR(zo::rate_bps(s, d), hand_rate(2.4e9, 20e6, 10, 5, 354, d), 1e-6 * zo::rate_bps(s, d));
  }
  // Ka, 6410 km: L = (4 pi 20e9 6.41e6 / 3e8)^2 = 2.8809e19 (194.60 dB);
  // SNR = 10 * 1633^2 / (1.380649e-23 * 354 * 5e8 * L) = 0.3787 (-4.22 dB); R = 5e8 log2(1.3787) = 231.5 Mb/s.
  EXPECT_NEAR(zo::to_db(zo::free_space_loss(20e9, 6410e3)), 194.595, 0.01);
  EXPECT_NEAR(zo::to_db(zo::snr(ka, 6410e3)), -4.22, 0.01);
  EXPECT_NEAR(zo::rate_bps(ka, 6410e3) / 1e6, 231.5, 0.1);
}

TEST(Link, ReferenceTable) {
  const zo::LinkPreset ka = zo::LinkPreset::ka(), s = zo::LinkPreset::s();
  const double bits = 251200;
  const struct { const zo::LinkPreset* p; double d, rate, snr_db, t; } rows[] = {
      {&ka, 6410e3, 231.5e6, -4.2, 22.5e-3},  {&ka, 31020e3, 11.56e6, -17.9, 125e-3},
      {&ka, 4435e3, 420e6, -1.0, 15.4e-3},    {&s, 6410e3, 0.177e6, -22.1, 1.44},
      {&s, 31020e3, 7.6e3, -35.8, 33.2},      {&s, 4435e3, 0.369e6, -18.9, 0.70}};
  for (const auto& r : rows) {
    EXPECT_NEAR(zo::rate_bps(*r.p, r.d), r.rate, 0.005 * r.rate) << r.p->name << " " << r.d;
    EXPECT_NEAR(zo::to_db(zo::snr(*r.p, r.d)), r.snr_db, 0.06) << r.p->name << " " << r.d;
    EXPECT_NEAR(zo::transfer_time_s(*r.p, bits, r.d), r.t, 0.01 * r.t) << r.p->name << " " << r.d;
  }
  EXPECT_DOUBLE_EQ(zo::transfer_time_s(ka, bits, 6410e3), bits / zo::rate_bps(ka, 6410e3) + 6410e3 / 3e8);
  EXPECT_EQ(zo::LinkPreset::named("s").frequency_hz, 2.4e9);
  EXPECT_THROW(zo::LinkPreset::named("x"), zen::Error);
  EXPECT_THROW(zo::rate_bps(ka, 0.0), zen::Error);
}

TEST(Link, IntegratedTransfer) {
  const zo::LinkPreset ka = zo::LinkPreset::ka();
  const double bits = 5e9;
  // Constant distance: equals the closed form.
  auto t = zo::integrated_transfer_end(ka, [](double) { return 10000e3; }, 100.0, 1e6, bits, 1.0);
  ASSERT_TRUE(t);
  EXPECT_NEAR(*t, 100.0 + zo::transfer_time_s(ka, bits, 10000e3), 1e-6);
  // Shrinking distance: faster than at the worst-case (initial) distance, slower than at the best.
  auto dist = [](double tt) { return 20000e3 - 100e3 * tt; };
  t = zo::integrated_transfer_end(ka, dist, 0.0, 150.0, bits, 0.5);
  ASSERT_TRUE(t);
  EXPECT_LT(*t, zo::transfer_time_s(ka, bits, 20000e3));
  EXPECT_GT(*t, zo::transfer_time_s(ka, bits, dist(*t)));
  // Does not fit before the window closes.
  EXPECT_FALSE(zo::integrated_transfer_end(ka, dist, 0.0, 5.0, bits, 0.5));
}

TEST(Link, LossesLowerTheSnrByTheirDecibels) {
  zo::LinkPreset p = zo::LinkPreset::ka();
  const double base = zo::to_db(zo::snr(p, 6406.9e3));
  p.losses_db = 3.5;
  EXPECT_NEAR(zo::to_db(zo::snr(p, 6406.9e3)), base - 3.5, 1e-9);
}

TEST(Link, MinimumSnrCutsTheLinkOff) {
  zo::LinkPreset p = zo::LinkPreset::ka();
  const double d = 31020e3;  // SNR -17.9 dB
  EXPECT_GT(zo::rate_bps(p, d), 0.0);
  p.min_snr_db = -17.0;
  EXPECT_EQ(zo::rate_bps(p, d), 0.0);
  EXPECT_TRUE(std::isinf(zo::transfer_time_s(p, 1000.0, d)));
  EXPECT_NEAR(zo::transfer_time_s(p, 0.0, d), d / 3e8, 1e-12);  // nothing to send: just the flight time
  EXPECT_GT(zo::rate_bps(p, 6406.9e3), 0.0);                      // -4.2 dB is above the cut
}

TEST(Link, DvbS2PicksTheMostEfficientModcodTheSnrAllows) {
  const auto& t = zo::dvbs2_modcods();
  ASSERT_EQ(t.size(), 28u);
  for (std::size_t i = 1; i < t.size(); ++i) EXPECT_LE(t[i - 1].es_n0_db, t[i].es_n0_db);
  EXPECT_STREQ(t.front().name, "QPSK 1/4");
  EXPECT_STREQ(t.back().name, "32APSK 9/10");
  zo::LinkPreset p = zo::LinkPreset::ka();
  p.rate_model = zo::RateModel::DvbS2;
  p.rolloff = 0.25;
  // Put the SNR at a chosen value by the distance: SNR ~ 1/d^2.
  const double d0 = 6406.9e3, s0 = zo::to_db(zo::snr(p, d0));
  auto at = [&](double snr_db) { return d0 * std::pow(10.0, (s0 - snr_db) / 20.0); };
  EXPECT_EQ(zo::dvbs2_modcod(p, at(-2.5)), nullptr);  // below QPSK 1/4
  EXPECT_EQ(zo::rate_bps(p, at(-2.5)), 0.0);
  EXPECT_STREQ(zo::dvbs2_modcod(p, at(-2.3))->name, "QPSK 1/4");
  EXPECT_NEAR(zo::rate_bps(p, at(-2.3)), 500e6 / 1.25 * 0.490243, 1e-3);
  EXPECT_STREQ(zo::dvbs2_modcod(p, at(5.6))->name, "8PSK 3/5");    // 1.780 b/sym beats QPSK 5/6
  EXPECT_STREQ(zo::dvbs2_modcod(p, at(6.5))->name, "QPSK 9/10");   // 1.789 beats 8PSK 3/5
  EXPECT_STREQ(zo::dvbs2_modcod(p, at(9.0))->name, "16APSK 2/3");  // 2.637 beats 8PSK 3/4 (2.228)
  EXPECT_STREQ(zo::dvbs2_modcod(p, at(30.0))->name, "32APSK 9/10");
  // The rate never exceeds Shannon's at the same SNR.
  zo::LinkPreset sh = p;
  sh.rate_model = zo::RateModel::Shannon;
  for (double snr = -2.0; snr < 20.0; snr += 0.25) EXPECT_LT(zo::rate_bps(p, at(snr)), zo::rate_bps(sh, at(snr)));
  EXPECT_EQ(zo::parse_rate_model("dvbs2"), zo::RateModel::DvbS2);
  EXPECT_THROW(zo::parse_rate_model("dvb-s2"), zen::Error);
}
