#pragma once
/// Mean element sets for SGP4/SDP4: two-line element sets (TLE, 2- or 3-line) and CCSDS OMM as
/// published by CelesTrak (FORMAT=json and FORMAT=csv). All readers throw zen::Error
/// (Result::InvalidArgument) naming the source, line and field of bad input.
#include <string>
#include <vector>

#include "zen/orbit/time.hpp"

namespace zen::orbit {

/// One element set, in the units of the TLE format.
struct MeanElements {
  std::string name;             ///< object name ("" when the source has none)
  std::string catalog;          ///< catalog number as written (alpha-5 allowed: "T0001", "44713")
  int catalog_number = 0;       ///< decoded (alpha-5: A=10 .. Z=33, I and O skipped; "T0001" -> 270001)
  std::string intl_designator;  ///< TLE style "58002B" (OMM "1958-002B" is converted)
  char classification = 'U';
  double epoch_jd = 0.0;        ///< epoch (UTC) = epoch_jd + epoch_jd_frac; epoch_jd is 0h of the day (.5)
  double epoch_jd_frac = 0.0;
  std::string epoch_utc;        ///< "YYYY-MM-DDTHH:MM:SS.ffffffZ"
  double mean_motion_rev_per_day = 0.0;  ///< Kozai mean motion [rev/day]
  double eccentricity = 0.0;
  double inclination_deg = 0.0;
  double raan_deg = 0.0;
  double arg_perigee_deg = 0.0;
  double mean_anomaly_deg = 0.0;
  double bstar = 0.0;           ///< B* drag term [1/earth radii]
  double ndot = 0.0;            ///< first derivative of mean motion / 2 [rev/day^2] as in the TLE
  double nddot = 0.0;           ///< second derivative of mean motion / 6 [rev/day^3] as in the TLE
  int element_set_no = 0;
  int rev_at_epoch = 0;
  int ephemeris_type = 0;
};

/// Decodes a 5-character catalog field: digits, or alpha-5 (first character A..Z without I and O,
/// standing for 10..33, then 4 digits). Leading blanks count as zeros. Throws zen::Error naming the
/// text when it is neither.
int decode_catalog_number(const std::string& field);
/// The 5-character form of a catalog number: zero-padded digits below 100000, alpha-5 up to 339999.
std::string encode_catalog_number(int number);

/// Parses one element set from its two lines (fixed TLE columns). Checks line numbers, the mod-10
/// checksum of each line ('-' counts 1; skipped when verify_checksum is false), equal catalog
/// numbers on both lines, and every field; trailing blanks and a carriage return are ignored, anything else
/// after column 69 is an error. Two-digit epoch years 57..99 are 19xx, 00..56 are 20xx.
MeanElements parse_tle(const std::string& line1, const std::string& line2, const std::string& name = "",
                       bool verify_checksum = true);

/// Parses element sets from text, detecting the format from the content: a JSON array or object
/// (OMM JSON), a header line with OMM keys (OMM CSV, any column order), else TLE lines (2-line sets,
/// optionally preceded by a name line; a "0 " prefix of the name line is dropped; lines starting
/// with '#' and blank lines are skipped). Errors name source_name:line and the field.
std::vector<MeanElements> parse_elements_text(const std::string& text, const std::string& source_name);

/// Reads a file and calls parse_elements_text with the path as source name.
std::vector<MeanElements> read_elements(const std::string& path);

}  // namespace zen::orbit
