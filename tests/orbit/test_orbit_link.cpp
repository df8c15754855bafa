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
