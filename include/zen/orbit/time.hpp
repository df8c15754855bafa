#pragma once
/// UTC calendar <-> Julian date helpers and the IAU-82 Greenwich mean sidereal time used with the TEME
/// frame of SGP4. Julian dates are kept as two doubles (jd, frac) where precision matters: the epoch is
/// jd + frac days; jd usually ends in .5 (0h UTC) and frac is the fraction of the day.
#include <string>
#include <utility>

namespace zen::orbit {

/// Julian date of a proleptic Gregorian UTC calendar instant (any year >= -4712; seconds may carry a
/// fraction). Example: 2000-01-01 12:00:00 -> 2451545.0. Throws zen::Error for a month outside 1..12,
/// a day outside 1..31, an hour outside 0..23, a minute outside 0..59 or seconds outside [0, 61).
double julian_date(int y, int mo, int d, int h, int mi, double s);

/// The same instant split into the Julian date of 0h of the day (ends in .5) and the day fraction.
std::pair<double, double> julian_date_split(int y, int mo, int d, int h, int mi, double s);

/// Parses "YYYY-MM-DDTHH:MM:SS[.ffffff][Z]" or "YYYY-MM-DD HH:MM:SS[.ffffff]" (UTC) into
/// (jd of 0h, day fraction). Throws zen::Error naming the text when it does not match.
std::pair<double, double> parse_utc(const std::string& iso);

/// ISO 8601 "YYYY-MM-DDTHH:MM:SS.ffffffZ" of the instant jd + frac, rounded to the microsecond.
std::string format_utc(double jd, double frac);

/// Greenwich mean sidereal time [rad, 0..2pi) by the IAU-82 expression (Vallado, "Fundamentals of
/// Astrodynamics and Applications", eq. 3-45), the sidereal angle that relates TEME to the Earth-fixed
/// frame. Argument: Julian date UT1 (here UT1 = UTC).
double gmst_rad(double jd_ut1_total);

}  // namespace zen::orbit
