#include "zen/orbit/link.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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

const char* rate_model_name(RateModel m) noexcept { return m == RateModel::DvbS2 ? "dvbs2" : "shannon"; }

RateModel parse_rate_model(const std::string& name) {
  if (name == "shannon") return RateModel::Shannon;
  if (name == "dvbs2") return RateModel::DvbS2;
  ZEN_THROW(Result::InvalidArgument, "unknown rate model '" + name + "' (expected shannon or dvbs2)");
}

const std::vector<Modcod>& dvbs2_modcods() {
  // ETSI EN 302 307-1 V1.4.1, Table 13: ideal Es/N0 [dB] for QEF on AWGN, normal FECFRAME.
  static const std::vector<Modcod> table = [] {
    std::vector<Modcod> t = {
        {"QPSK 1/4", -2.35, 0.490243},   {"QPSK 1/3", -1.24, 0.656448},   {"QPSK 2/5", -0.30, 0.789412},
        {"QPSK 1/2", 1.00, 0.988858},    {"QPSK 3/5", 2.23, 1.188304},    {"QPSK 2/3", 3.10, 1.322253},
        {"QPSK 3/4", 4.03, 1.487473},    {"QPSK 4/5", 4.68, 1.587196},    {"QPSK 5/6", 5.18, 1.654663},
        {"QPSK 8/9", 6.20, 1.766451},    {"QPSK 9/10", 6.42, 1.788612},   {"8PSK 3/5", 5.50, 1.779991},
        {"8PSK 2/3", 6.62, 1.980636},    {"8PSK 3/4", 7.91, 2.228124},    {"8PSK 5/6", 9.35, 2.478562},
        {"8PSK 8/9", 10.69, 2.646012},   {"8PSK 9/10", 10.98, 2.679207},  {"16APSK 2/3", 8.97, 2.637201},
        {"16APSK 3/4", 10.21, 2.966728}, {"16APSK 4/5", 11.03, 3.165623}, {"16APSK 5/6", 11.61, 3.300184},
        {"16APSK 8/9", 12.89, 3.523143}, {"16APSK 9/10", 13.13, 3.567342}, {"32APSK 3/4", 12.73, 3.703295},
        {"32APSK 4/5", 13.64, 3.951571}, {"32APSK 5/6", 14.28, 4.119540}, {"32APSK 8/9", 15.69, 4.397854},
        {"32APSK 9/10", 16.05, 4.453027}};
    std::stable_sort(t.begin(), t.end(), [](const Modcod& a, const Modcod& b) { return a.es_n0_db < b.es_n0_db; });
    return t;
  }();
  return table;
}

double snr(const LinkPreset& p, double distance_m) {
  ZEN_ENFORCE(p.bandwidth_hz > 0.0 && p.noise_temp_k > 0.0,
              "preset '" + p.name + "' needs positive bandwidth and noise temperature");
  return p.tx_power_w * p.gain_tx * p.gain_rx /
         (kBoltzmann * p.noise_temp_k * p.bandwidth_hz * free_space_loss(p.frequency_hz, distance_m) *
          from_db(p.losses_db));
}

const Modcod* dvbs2_modcod(const LinkPreset& p, double distance_m) {
  const double db = to_db(snr(p, distance_m));
  if (db < p.min_snr_db) return nullptr;
  const Modcod* best = nullptr;
  for (const Modcod& m : dvbs2_modcods())
    if (m.es_n0_db <= db && (!best || m.efficiency > best->efficiency)) best = &m;
  return best;
}

double rate_bps(const LinkPreset& p, double distance_m) {
  if (p.rate_model == RateModel::DvbS2) {
    const Modcod* m = dvbs2_modcod(p, distance_m);
    return m ? p.bandwidth_hz / (1.0 + p.rolloff) * m->efficiency : 0.0;
  }
  const double x = snr(p, distance_m);
  if (to_db(x) < p.min_snr_db) return 0.0;
  return p.bandwidth_hz * std::log2(1.0 + x);
}

double transfer_time_s(const LinkPreset& p, double bits, double distance_m) {
  ZEN_ENFORCE(bits >= 0.0, "bits must be >= 0, got " + std::to_string(bits));
  const double r = rate_bps(p, distance_m);
  if (bits > 0.0 && r <= 0.0) return std::numeric_limits<double>::infinity();
  return (bits > 0.0 ? bits / r : 0.0) + distance_m / kSpeedOfLight;
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
