#pragma once
/// Link budget: free-space path loss, SNR, Shannon rate and transfer time.
///   L = (4 pi f d / c)^2,  SNR = P_t G_t G_r / (k_B T B L),  R = B log2(1 + SNR),
///   t = bits / R + d / c.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zen::orbit {

struct LinkPreset {
  std::string name;
  double frequency_hz = 0.0;
  double bandwidth_hz = 0.0;
  double tx_power_w = 0.0;
  double gain_tx = 1.0;   ///< linear
  double gain_rx = 1.0;   ///< linear
  double noise_temp_k = 0.0;

  /// Ka: 20 GHz, 500 MHz, 10 W, G = 1633 (32.1 dBi) both ends, 354 K.
  static LinkPreset ka();
  /// S: 2.4 GHz, 20 MHz, 10 W, G = 5 (7.0 dBi) both ends, 354 K.
  static LinkPreset s();
  /// "ka" or "s"; throws zen::Error naming the value otherwise.
  static LinkPreset named(const std::string& name);
  static std::vector<std::string> names() { return {"ka", "s"}; }
};

double to_db(double linear);
double from_db(double db);

/// Free-space path loss (linear, >= 1 for far field) at distance d [m].
double free_space_loss(double frequency_hz, double distance_m);
/// Linear SNR at distance d.
double snr(const LinkPreset& p, double distance_m);
/// Shannon rate [bit/s] at distance d.
double rate_bps(const LinkPreset& p, double distance_m);
/// bits / R(d) + d / c [s].
double transfer_time_s(const LinkPreset& p, double bits, double distance_m);

/// Transfer with the rate integrated over a changing distance d(t): the time at which `bits` have
/// been delivered starting at t_start (trapezoidal integration with step_s, linear interpolation
/// inside the last step) plus the propagation delay d/c at that time; nullopt if the bits do not
/// fit before t_end.
std::optional<double> integrated_transfer_end(const LinkPreset& p,
                                              const std::function<double(double)>& distance_at,
                                              double t_start, double t_end, double bits,
                                              double step_s = 1.0);

}  // namespace zen::orbit
