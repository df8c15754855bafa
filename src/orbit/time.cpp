#include "zen/orbit/time.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "zen/error.hpp"
#include "zen/orbit/constants.hpp"

namespace zen::orbit {
namespace {

// Julian day number (integer, the day starting at noon) of a Gregorian date (Fliegel & Van Flandern).
long long day_number(long long y, long long m, long long d) {
  const long long a = (14 - m) / 12;
  const long long yy = y + 4800 - a;
  const long long mm = m + 12 * a - 3;
  auto fdiv = [](long long n, long long k) { return (n >= 0) ? n / k : -((-n + k - 1) / k); };
  return d + fdiv(153 * mm + 2, 5) + 365 * yy + fdiv(yy, 4) - fdiv(yy, 100) + fdiv(yy, 400) - 32045;
}

struct Civil {
  long long y, m, d;
};

// Inverse of day_number (Richards' algorithm).
Civil civil_from_day_number(long long j) {
  const long long f = j + 1401 + (((4 * j + 274277) / 146097) * 3) / 4 - 38;
  const long long e = 4 * f + 3;
  const long long g = (e % 1461) / 4;
  const long long h = 5 * g + 2;
  Civil c{};
  c.d = (h % 153) / 5 + 1;
  c.m = ((h / 153 + 2) % 12) + 1;
  c.y = e / 1461 - 4716 + (12 + 2 - c.m) / 12;
  return c;
}

void check_calendar(int y, int mo, int d, int h, int mi, double s) {
  ZEN_ENFORCE(y >= -4712, "julian_date: year " + std::to_string(y) + " before -4712");
  ZEN_ENFORCE(mo >= 1 && mo <= 12, "julian_date: month " + std::to_string(mo) + " outside 1..12");
  ZEN_ENFORCE(d >= 1 && d <= 31, "julian_date: day " + std::to_string(d) + " outside 1..31");
  ZEN_ENFORCE(h >= 0 && h <= 23, "julian_date: hour " + std::to_string(h) + " outside 0..23");
  ZEN_ENFORCE(mi >= 0 && mi <= 59, "julian_date: minute " + std::to_string(mi) + " outside 0..59");
  ZEN_ENFORCE(std::isfinite(s) && s >= 0.0 && s < 61.0,
              "julian_date: seconds " + std::to_string(s) + " outside [0, 61)");
}

}  // namespace

std::pair<double, double> julian_date_split(int y, int mo, int d, int h, int mi, double s) {
  check_calendar(y, mo, d, h, mi, s);
  const double jd0 = static_cast<double>(day_number(y, mo, d)) - 0.5;
  const double frac = (h * 3600.0 + mi * 60.0 + s) / 86400.0;
  return {jd0, frac};
}

double julian_date(int y, int mo, int d, int h, int mi, double s) {
  const auto [jd0, frac] = julian_date_split(y, mo, d, h, mi, s);
  return jd0 + frac;
}

std::pair<double, double> parse_utc(const std::string& iso) {
  // Fixed layout: YYYY-MM-DD, then 'T' or ' ', HH:MM:SS, optional .digits, optional Z.
  const std::string what = "parse_utc: '" + iso + "' is not a UTC time of the form YYYY-MM-DDTHH:MM:SS[.ffffff][Z]";
  ZEN_ENFORCE(iso.size() >= 19, what);
  auto digits = [&](size_t pos, size_t n) {
    int v = 0;
    for (size_t k = pos; k < pos + n; ++k) {
      ZEN_ENFORCE(iso[k] >= '0' && iso[k] <= '9', what);
      v = v * 10 + (iso[k] - '0');
    }
    return v;
  };
  ZEN_ENFORCE(iso[4] == '-' && iso[7] == '-' && (iso[10] == 'T' || iso[10] == ' ') && iso[13] == ':' &&
                  iso[16] == ':',
              what);
  const int y = digits(0, 4), mo = digits(5, 2), d = digits(8, 2);
  const int h = digits(11, 2), mi = digits(14, 2), sec = digits(17, 2);
  double frac_sec = 0.0;
  size_t pos = 19;
  if (pos < iso.size() && iso[pos] == '.') {
    ++pos;
    double scale = 0.1;
    const size_t start = pos;
    while (pos < iso.size() && iso[pos] >= '0' && iso[pos] <= '9') {
      frac_sec += (iso[pos] - '0') * scale;
      scale *= 0.1;
      ++pos;
    }
    ZEN_ENFORCE(pos > start, what);
  }
  if (pos < iso.size() && iso[pos] == 'Z') ++pos;
  ZEN_ENFORCE(pos == iso.size(), what);
  ZEN_ENFORCE(mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 && sec <= 60, what);
  return julian_date_split(y, mo, d, h, mi, sec + frac_sec);
}

std::string format_utc(double jd, double frac) {
  ZEN_ENFORCE(std::isfinite(jd) && std::isfinite(frac), "format_utc: non-finite Julian date");
  // Day number of the civil day (0h) containing jd, and the remaining fraction of the day.
  double day0 = std::floor(jd - 0.5);  // JD of 0h is day0 + 0.5
  double f = (jd - 0.5 - day0) + frac;
  const double whole = std::floor(f);
  day0 += whole;
  f -= whole;
  long long micros = std::llround(f * 86400.0e6);
  long long day = static_cast<long long>(day0) + 1;  // Julian day number of the day starting at noon of 0h
  if (micros >= 86400LL * 1000000LL) {
    micros -= 86400LL * 1000000LL;
    ++day;
  }
  const Civil c = civil_from_day_number(day);
  const long long secs = micros / 1000000, us = micros % 1000000;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06lldZ", c.y, c.m, c.d, secs / 3600,
                (secs / 60) % 60, secs % 60, us);
  return buf;
}

double gmst_rad(double jd_ut1_total) {
  // IAU-82: GMST [s] = 67310.54841 + (876600 h + 8640184.812866 s) T + 0.093104 T^2 - 6.2e-6 T^3,
  // T in Julian centuries of UT1 from J2000; 240 s of time = 1 degree.
  const double t = (jd_ut1_total - 2451545.0) / 36525.0;
  const double sec = ((-6.2e-6 * t + 0.093104) * t + (876600.0 * 3600.0 + 8640184.812866)) * t + 67310.54841;
  double g = std::fmod(sec * kDegToRad / 240.0, kTwoPi);
  if (g < 0.0) g += kTwoPi;
  return g;
}

}  // namespace zen::orbit
