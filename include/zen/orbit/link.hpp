#pragma once
/// Link budget: free-space path loss, SNR, rate and transfer time.
///   L = (4 pi f d / c)^2,  SNR = P_t G_t G_r / (k_B T B L L_extra),
///   R = B log2(1 + SNR) (Shannon) or B / (1 + rolloff) x the spectral efficiency of the best
///   DVB-S2 MODCOD whose required Es/N0 the SNR meets (ETSI EN 302 307-1), and 0 below min_snr_db;
///   t = bits / R + d / c.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zen::orbit {

enum class RateModel { Shannon, DvbS2 };
const char* rate_model_name(RateModel m) noexcept;
RateModel parse_rate_model(const std::string& name);  ///< "shannon" | "dvbs2"

/// A DVB-S2 modulation and coding (normal FECFRAME, no pilots): the ideal Es/N0 at quasi-error-free
/// operation on AWGN and the spectral efficiency, as tabulated in ETSI EN 302 307-1.
struct Modcod {
  const char* name;
  double es_n0_db;
  double efficiency;  ///< information bits per symbol
};
/// The 28 DVB-S2 MODCODs, sorted by required Es/N0.
const std::vector<Modcod>& dvbs2_modcods();

struct LinkPreset {
  std::string name;
  double frequency_hz = 0.0;
  double bandwidth_hz = 0.0;
  double tx_power_w = 0.0;
  double gain_tx = 1.0;   ///< linear
  double gain_rx = 1.0;   ///< linear
  double noise_temp_k = 0.0;
  double losses_db = 0.0;             ///< extra losses (pointing, polarisation, atmosphere, implementation)
  RateModel rate_model = RateModel::Shannon;
  double min_snr_db = -1e300;         ///< below this SNR the link carries nothing
  double rolloff = 0.2;               ///< DVB-S2: symbol rate = bandwidth / (1 + rolloff)

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
/// Rate [bit/s] at distance d under the preset's rate model (0: the link carries nothing there).
double rate_bps(const LinkPreset& p, double distance_m);
/// The MODCOD a DVB-S2 link uses at distance d (nullptr below the lowest one or min_snr_db).
const Modcod* dvbs2_modcod(const LinkPreset& p, double distance_m);
/// bits / R(d) + d / c [s]; +infinity where the rate is 0 (and bits > 0).
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
