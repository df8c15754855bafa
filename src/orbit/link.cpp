#include "zen/orbit/link.hpp"

#include <cmath>

#include "zen/error.hpp"
#include "zen/orbit/constants.hpp"

namespace zen::orbit {

LinkPreset LinkPreset::ka() { return LinkPreset{"ka", 20e9, 500e6, 10.0, 1633.0, 1633.0, 354.0}; }

LinkPreset LinkPreset::s() { return LinkPreset{"s", 2.4e9, 20e6, 10.0, 5.0, 5.0, 354.0}; }

LinkPreset LinkPreset::named(const std::string& name) {
  if (name == "ka") return ka();
  if (name == "s") return s();
  ZEN_THROW(Result::InvalidArgument, "unknown link preset '" + name + "' (expected ka or s)");
}

double to_db(double linear) { return 10.0 * std::log10(linear); }
double from_db(double db) { return std::pow(10.0, db / 10.0); }

double free_space_loss(double frequency_hz, double distance_m) {
  ZEN_ENFORCE(distance_m > 0.0, "link distance must be positive, got " + std::to_string(distance_m) + " m");
  ZEN_ENFORCE(frequency_hz > 0.0, "frequency must be positive, got " + std::to_string(frequency_hz) + " Hz");
  const double x = 4.0 * kPi * frequency_hz * distance_m / kSpeedOfLight;
  return x * x;
}

double snr(const LinkPreset& p, double distance_m) {
  ZEN_ENFORCE(p.bandwidth_hz > 0.0 && p.noise_temp_k > 0.0,
              "preset '" + p.name + "' needs positive bandwidth and noise temperature");
  return p.tx_power_w * p.gain_tx * p.gain_rx /
         (kBoltzmann * p.noise_temp_k * p.bandwidth_hz * free_space_loss(p.frequency_hz, distance_m));
}

double rate_bps(const LinkPreset& p, double distance_m) {
  return p.bandwidth_hz * std::log2(1.0 + snr(p, distance_m));
}

double transfer_time_s(const LinkPreset& p, double bits, double distance_m) {
  ZEN_ENFORCE(bits >= 0.0, "bits must be >= 0, got " + std::to_string(bits));
  return bits / rate_bps(p, distance_m) + distance_m / kSpeedOfLight;
}

std::optional<double> integrated_transfer_end(const LinkPreset& p, const std::function<double(double)>& distance_at,
                                              double t_start, double t_end, double bits, double step_s) {
  ZEN_ENFORCE(step_s > 0.0, "integration step must be positive, got " + std::to_string(step_s));
  ZEN_ENFORCE(bits >= 0.0, "bits must be >= 0, got " + std::to_string(bits));
  double t = t_start, sent = 0.0;
  double r0 = rate_bps(p, distance_at(t));
  while (sent < bits) {
    if (t >= t_end) return std::nullopt;
    const double tn = std::min(t + step_s, t_end);
    const double r1 = rate_bps(p, distance_at(tn));
    const double h = tn - t;
    const double chunk = 0.5 * (r0 + r1) * h;
    if (sent + chunk >= bits) {
      // Rate linear in [t, tn]: solve r0 x + (r1 - r0) x^2 / (2h) = need for x in [0, h].
      const double need = bits - sent;
      const double a = 0.5 * (r1 - r0) / h, b = r0;
      double x;
      if (std::abs(a) * h < 1e-12 * b) x = need / b;
      else x = (-b + std::sqrt(std::max(0.0, b * b + 4.0 * a * need))) / (2.0 * a);
      x = std::clamp(x, 0.0, h);
      const double done = t + x;
      const double arrival = done + distance_at(done) / kSpeedOfLight;
      return arrival;
    }
    sent += chunk;
    t = tn;
    r0 = r1;
  }
  return t + distance_at(t) / kSpeedOfLight;  // bits == 0
}

}  // namespace zen::orbit
