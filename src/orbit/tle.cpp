// TLE and OMM (CelesTrak JSON / CSV) readers. Column layout of the TLE format: Hoots & Roehrich,
// Spacetrack Report #3 (1980), and CelesTrak's "NORAD Two-Line Element Set Format".
#include "zen/orbit/tle.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "zen/error.hpp"

namespace zen::orbit {
namespace {

[[noreturn]] void fail(const std::string& where, const std::string& msg) {
  ZEN_THROW(Result::InvalidArgument, where + ": " + msg);
}

std::string where_of(const std::string& source, int line) { return source + ":" + std::to_string(line); }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string rstrip(const std::string& s) {
  size_t e = s.size();
  while (e > 0 && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(0, e);
}

// Parses a whole string as a finite double; nullopt when it is not one.
std::optional<double> to_double(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long long> to_integer(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  size_t i = (t[0] == '+' || t[0] == '-') ? 1 : 0;
  if (i == t.size()) return std::nullopt;
  for (size_t k = i; k < t.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(t[k]))) return std::nullopt;
  if (t.size() - i > 12) return std::nullopt;
  return std::stoll(t);
}

// ---------------------------------------------------------------------------------------------
// TLE

struct TleLine {
  const std::string& text;
  int number;             // 1 or 2
  std::string where;      // "source:line"
};

std::string columns(const TleLine& l, int c1, int c2) { return l.text.substr(c1 - 1, c2 - c1 + 1); }

[[noreturn]] void field_fail(const TleLine& l, const char* field, int c1, int c2, const std::string& why) {
  fail(l.where, "TLE line " + std::to_string(l.number) + " field '" + field + "' (columns " + std::to_string(c1) +
                    "-" + std::to_string(c2) + ") = '" + columns(l, c1, c2) + "' " + why);
}

double double_field(const TleLine& l, const char* field, int c1, int c2) {
  const auto v = to_double(columns(l, c1, c2));
  if (!v) field_fail(l, field, c1, c2, "is not a number");
  return *v;
}

int int_field(const TleLine& l, const char* field, int c1, int c2, bool blank_is_zero) {
  const std::string t = trim(columns(l, c1, c2));
  if (t.empty() && blank_is_zero) return 0;
  const auto v = to_integer(t);
  if (!v) field_fail(l, field, c1, c2, "is not an integer");
  return static_cast<int>(*v);
}

// "+MMMMM-E" with an implied leading decimal point: " 28098-4" = 0.28098e-4, "-11606-4" = -0.11606e-4.
double exponent_field(const TleLine& l, const char* field, int c1, int c2) {
  const std::string t = trim(columns(l, c1, c2));
  size_t i = 0;
  double sign = 1.0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) sign = (t[i++] == '-') ? -1.0 : 1.0;
  const size_t m0 = i;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  const std::string mant = t.substr(m0, i - m0);
  if (mant.empty() || i + 2 != t.size() || (t[i] != '+' && t[i] != '-') ||
      !std::isdigit(static_cast<unsigned char>(t[i + 1])))
    field_fail(l, field, c1, c2, "is not of the form [+-]NNNNN[+-]E (implied decimal point)");
  const int ex = (t[i + 1] - '0') * (t[i] == '-' ? -1 : 1);
  return sign * std::stod("0." + mant) * std::pow(10.0, ex);
}

void check_range(const TleLine& l, const char* field, int c1, int c2, double v, double lo, double hi) {
  if (!(v >= lo && v <= hi))
    field_fail(l, field, c1, c2, "is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

int checksum(const std::string& line) {
  int sum = 0;
  for (int k = 0; k < 68; ++k) {
    const char c = line[k];
    if (c >= '0' && c <= '9') sum += c - '0';
    if (c == '-') sum += 1;
  }
  return sum % 10;
}

void check_line(const TleLine& l, bool verify_checksum) {
  const std::string n = std::to_string(l.number);
  if (l.text.empty() || l.text[0] != '0' + l.number)
    fail(l.where, "TLE line " + n + " must start with '" + n + "', got '" + l.text.substr(0, 20) + "'");
  if (l.text.size() < 68 || (verify_checksum && l.text.size() < 69))
    fail(l.where, "TLE line " + n + " has " + std::to_string(l.text.size()) + " characters, expected 69");
  if (l.text.size() > 69)
    fail(l.where, "TLE line " + n + " has unexpected text after column 69: '" + l.text.substr(69) + "'");
  if (l.text[1] != ' ') fail(l.where, "TLE line " + n + ": column 2 must be blank");
  if (verify_checksum) {
    const char c = l.text[68];
    if (!std::isdigit(static_cast<unsigned char>(c)))
      fail(l.where, "TLE line " + n + " checksum (column 69) '" + std::string(1, c) + "' is not a digit");
    const int want = checksum(l.text);
    if (c - '0' != want)
      fail(l.where, "TLE line " + n + " checksum mismatch: column 69 says " + std::string(1, c) +
                        ", the line sums to " + std::to_string(want) + " (mod 10, '-' counts 1)");
  }
}

MeanElements parse_tle_at(const std::string& raw1, const std::string& raw2, const std::string& name,
                          const std::string& where1, const std::string& where2, bool verify_checksum) {
  const std::string s1 = rstrip(raw1), s2 = rstrip(raw2);
  const TleLine l1{s1, 1, where1}, l2{s2, 2, where2};
  check_line(l1, verify_checksum);
  check_line(l2, verify_checksum);

  MeanElements e;
  e.name = trim(name);
  e.catalog = trim(columns(l1, 3, 7));
  try {
    e.catalog_number = decode_catalog_number(columns(l1, 3, 7));
  } catch (const Error&) {
    field_fail(l1, "catalog number", 3, 7, "is neither 5 digits nor alpha-5");
  }
  if (trim(columns(l2, 3, 7)) != e.catalog) {
    int other = -1;
    try {
      other = decode_catalog_number(columns(l2, 3, 7));
    } catch (const Error&) {
    }
    if (other != e.catalog_number)
      fail(where2, "TLE catalog numbers differ: line 1 has '" + columns(l1, 3, 7) + "', line 2 has '" +
                       columns(l2, 3, 7) + "'");
  }
  e.classification = s1[7] == ' ' ? 'U' : s1[7];
  if (!std::isalpha(static_cast<unsigned char>(e.classification)))
    field_fail(l1, "classification", 8, 8, "is not a letter");
  e.intl_designator = trim(columns(l1, 10, 17));

  const int yy = int_field(l1, "epoch year", 19, 20, false);
  if (yy < 0 || yy > 99) field_fail(l1, "epoch year", 19, 20, "is not a two-digit year");
  const int year = yy >= 57 ? 1900 + yy : 2000 + yy;
  const double doy = double_field(l1, "epoch day", 21, 32);
  const double year_days = ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0) ? 366.0 : 365.0;
  // Day 1.0 is January 1, 0h; "day 367" style epochs (year_days + 1) are tolerated as the next January 1.
  check_range(l1, "epoch day", 21, 32, doy, 1.0, year_days + 1.0);
  const double whole = std::floor(doy);
  e.epoch_jd = julian_date_split(year, 1, 1, 0, 0, 0.0).first + (whole - 1.0);
  e.epoch_jd_frac = doy - whole;
  e.epoch_utc = format_utc(e.epoch_jd, e.epoch_jd_frac);

  e.ndot = double_field(l1, "ndot", 34, 43);
  e.nddot = exponent_field(l1, "nddot", 45, 52);
  e.bstar = exponent_field(l1, "bstar", 54, 61);
  e.ephemeris_type = int_field(l1, "ephemeris type", 63, 63, true);
  e.element_set_no = int_field(l1, "element set number", 65, 68, true);

  e.inclination_deg = double_field(l2, "inclination", 9, 16);
  check_range(l2, "inclination", 9, 16, e.inclination_deg, 0.0, 180.0);
  e.raan_deg = double_field(l2, "raan", 18, 25);
  check_range(l2, "raan", 18, 25, e.raan_deg, 0.0, 360.0);
  const std::string ecc = columns(l2, 27, 33);
  std::string ecc_digits;
  for (char c : ecc) {
    if (c == ' ') c = '0';
    if (!std::isdigit(static_cast<unsigned char>(c)))
      field_fail(l2, "eccentricity", 27, 33, "is not 7 digits (implied leading decimal point)");
    ecc_digits += c;
  }
  if (trim(ecc).empty()) field_fail(l2, "eccentricity", 27, 33, "is blank");
  e.eccentricity = std::stod("0." + ecc_digits);
  e.arg_perigee_deg = double_field(l2, "argument of perigee", 35, 42);
  check_range(l2, "argument of perigee", 35, 42, e.arg_perigee_deg, 0.0, 360.0);
  e.mean_anomaly_deg = double_field(l2, "mean anomaly", 44, 51);
  check_range(l2, "mean anomaly", 44, 51, e.mean_anomaly_deg, 0.0, 360.0);
  e.mean_motion_rev_per_day = double_field(l2, "mean motion", 53, 63);
  if (!(e.mean_motion_rev_per_day > 0.0)) field_fail(l2, "mean motion", 53, 63, "must be positive");
  e.rev_at_epoch = int_field(l2, "revolution number", 64, 68, true);
  return e;
}

// ---------------------------------------------------------------------------------------------
// OMM

// Field getter: the value of an OMM key as text, nullopt when absent (or JSON null).
using Getter = std::function<std::optional<std::string>(const std::string& key)>;

std::string intl_from_object_id(const std::string& id) {
  // "1958-002B" -> "58002B"; anything else is kept as written.
  if (id.size() >= 9 && id[4] == '-' && std::isdigit(static_cast<unsigned char>(id[0])) &&
      std::isdigit(static_cast<unsigned char>(id[1])) && std::isdigit(static_cast<unsigned char>(id[2])) &&
      std::isdigit(static_cast<unsigned char>(id[3])))
    return id.substr(2, 2) + id.substr(5);
  return id;
}

[[noreturn]] void fail_field(const std::string& where, const std::string& key, const std::string& why) {
  fail(where, "OMM field " + key + " " + why);
}

MeanElements elements_from_omm(const Getter& get, const std::string& where) {
  auto omm_fail = [&](const std::string& key, const std::string& why) { fail_field(where, key, why); };
  auto required = [&](const std::string& key) {
    const auto v = get(key);
    if (!v || trim(*v).empty()) fail_field(where, key, "is missing");
    return trim(*v);
  };
  auto number = [&](const std::string& key, std::optional<double> dflt) -> double {
    const auto v = get(key);
    if (!v || trim(*v).empty()) {
      if (dflt) return *dflt;
      fail_field(where, key, "is missing");
    }
    const auto d = to_double(*v);
    if (!d) fail_field(where, key, "= '" + *v + "' is not a number");
    return *d;
  };
  auto integer = [&](const std::string& key, std::optional<long long> dflt) -> int {
    const auto v = get(key);
    if (!v || trim(*v).empty()) {
      if (dflt) return static_cast<int>(*dflt);
      fail_field(where, key, "is missing");
    }
    auto i = to_integer(*v);
    if (!i) {  // JSON numbers like 5.0
      const auto d = to_double(*v);
      if (d && *d == std::floor(*d) && std::fabs(*d) < 2e9) i = static_cast<long long>(*d);
    }
    if (!i) fail_field(where, key, "= '" + *v + "' is not an integer");
    return static_cast<int>(*i);
  };
  auto in_range = [&](const std::string& key, double v, double lo, double hi) {
    if (!(v >= lo && v <= hi))
      omm_fail(key, "= " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };

  MeanElements e;
  e.name = trim(get("OBJECT_NAME").value_or(""));
  e.intl_designator = intl_from_object_id(trim(get("OBJECT_ID").value_or("")));
  const std::string epoch = required("EPOCH");
  try {
    const auto [jd, frac] = parse_utc(epoch);
    e.epoch_jd = jd;
    e.epoch_jd_frac = frac;
  } catch (const Error&) {
    omm_fail("EPOCH", "= '" + epoch + "' is not a UTC time YYYY-MM-DDTHH:MM:SS[.ffffff]");
  }
  e.epoch_utc = format_utc(e.epoch_jd, e.epoch_jd_frac);
  e.mean_motion_rev_per_day = number("MEAN_MOTION", std::nullopt);
  if (!(e.mean_motion_rev_per_day > 0.0)) omm_fail("MEAN_MOTION", "must be positive");
  e.eccentricity = number("ECCENTRICITY", std::nullopt);
  in_range("ECCENTRICITY", e.eccentricity, 0.0, 0.9999999);
  e.inclination_deg = number("INCLINATION", std::nullopt);
  in_range("INCLINATION", e.inclination_deg, 0.0, 180.0);
  e.raan_deg = number("RA_OF_ASC_NODE", std::nullopt);
  in_range("RA_OF_ASC_NODE", e.raan_deg, 0.0, 360.0);
  e.arg_perigee_deg = number("ARG_OF_PERICENTER", std::nullopt);
  in_range("ARG_OF_PERICENTER", e.arg_perigee_deg, 0.0, 360.0);
  e.mean_anomaly_deg = number("MEAN_ANOMALY", std::nullopt);
  in_range("MEAN_ANOMALY", e.mean_anomaly_deg, 0.0, 360.0);
  e.ephemeris_type = integer("EPHEMERIS_TYPE", 0);
  const std::string cls = trim(get("CLASSIFICATION_TYPE").value_or("U"));
  if (cls.size() > 1 || (cls.size() == 1 && !std::isalpha(static_cast<unsigned char>(cls[0]))))
    omm_fail("CLASSIFICATION_TYPE", "= '" + cls + "' is not one letter");
  e.classification = cls.empty() ? 'U' : cls[0];
  const std::string cat = required("NORAD_CAT_ID");
  if (const auto n = to_integer(cat)) {
    if (*n < 0 || *n > 339999) omm_fail("NORAD_CAT_ID", "= " + cat + " is outside 0..339999");
    e.catalog_number = static_cast<int>(*n);
    e.catalog = encode_catalog_number(e.catalog_number);
  } else {
    try {
      e.catalog_number = decode_catalog_number(cat);
    } catch (const Error&) {
      omm_fail("NORAD_CAT_ID", "= '" + cat + "' is neither a number nor alpha-5");
    }
    e.catalog = cat;
  }
  e.element_set_no = integer("ELEMENT_SET_NO", 0);
  e.rev_at_epoch = integer("REV_AT_EPOCH", 0);
  e.bstar = number("BSTAR", std::nullopt);
  e.ndot = number("MEAN_MOTION_DOT", 0.0);
  e.nddot = number("MEAN_MOTION_DDOT", 0.0);
  return e;
}

// Line (1-based) at which each top-level JSON object starts: the elements of a top-level array, or
// the single top-level object.
std::vector<int> json_object_lines(const std::string& text) {
  std::vector<int> lines;
  int line = 1, depth = 0, object_depth = -1;
  bool in_string = false, escape = false;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (object_depth < 0) object_depth = (c == '[') ? 1 : 0;
      if (c == '{' && depth == object_depth) lines.push_back(line);
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return lines;
}

std::vector<MeanElements> parse_omm_json(const std::string& text, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& ex) {
    int line = 1;
    for (size_t k = 0; k < ex.byte && k < text.size(); ++k)
      if (text[k] == '\n') ++line;
    fail(where_of(source, line), std::string("invalid OMM JSON: ") + ex.what());
  }
  const std::vector<int> lines = json_object_lines(text);
  std::vector<const nlohmann::json*> objects;
  if (doc.is_array()) {
    for (const auto& o : doc) objects.push_back(&o);
  } else {
    objects.push_back(&doc);
  }
  std::vector<MeanElements> out;
  for (size_t k = 0; k < objects.size(); ++k) {
    const auto& o = *objects[k];
    const int line = k < lines.size() ? lines[k] : 1;
    const std::string where = where_of(source, line) + " (OMM object #" + std::to_string(k + 1) + ")";
    if (!o.is_object()) fail(where, "expected a JSON object with OMM keys");
    Getter get = [&](const std::string& key) -> std::optional<std::string> {
      const auto it = o.find(key);
      if (it == o.end() || it->is_null()) return std::nullopt;
      if (it->is_string()) return it->get<std::string>();
      if (it->is_number()) return it->dump();
      fail(where, "OMM field " + key + " must be a number or a string, got " + it->dump());
    };
    out.push_back(elements_from_omm(get, where));
  }
  return out;
}

std::vector<std::string> split_csv(const std::string& line, const std::string& where) {
  std::vector<std::string> cells;
  std::string cur;
  bool quoted = false;
  for (size_t k = 0; k < line.size(); ++k) {
    const char c = line[k];
    if (quoted) {
      if (c == '"' && k + 1 < line.size() && line[k + 1] == '"') {
        cur += '"';
        ++k;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (quoted) fail(where, "unterminated quoted CSV field");
  cells.push_back(cur);
  return cells;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : text) {
    if (c == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  for (auto& l : lines)
    if (!l.empty() && l.back() == '\r') l.pop_back();
  return lines;
}

std::vector<MeanElements> parse_omm_csv(const std::vector<std::string>& lines, size_t header_index,
                                        const std::string& source) {
  const std::string hwhere = where_of(source, static_cast<int>(header_index + 1));
  std::vector<std::string> header = split_csv(lines[header_index], hwhere);
  std::map<std::string, size_t> column;
  for (size_t k = 0; k < header.size(); ++k) {
    const std::string key = trim(header[k]);
    if (key.empty()) continue;
    if (column.count(key)) fail(hwhere, "OMM CSV header repeats column " + key);
    column[key] = k;
  }
  std::vector<MeanElements> out;
  for (size_t i = header_index + 1; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::string where = where_of(source, static_cast<int>(i + 1));
    const std::vector<std::string> cells = split_csv(lines[i], where);
    if (cells.size() != header.size())
      fail(where, "OMM CSV row has " + std::to_string(cells.size()) + " columns, the header has " +
                      std::to_string(header.size()));
    Getter get = [&](const std::string& key) -> std::optional<std::string> {
      const auto it = column.find(key);
      if (it == column.end()) return std::nullopt;
      return cells[it->second];
    };
    out.push_back(elements_from_omm(get, where));
  }
  return out;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::vector<MeanElements> parse_tle_text(const std::vector<std::string>& raw, const std::string& source) {
  // Non-blank, non-comment lines with their 1-based line numbers.
  std::vector<std::pair<std::string, int>> lines;
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string l = rstrip(raw[i]);
    if (trim(l).empty() || trim(l)[0] == '#') continue;
    lines.emplace_back(l, static_cast<int>(i + 1));
  }
  std::vector<MeanElements> out;
  size_t i = 0;
  while (i < lines.size()) {
    std::string name;
    const bool pair_here = starts_with(lines[i].first, "1 ") && i + 1 < lines.size() &&
                           starts_with(lines[i + 1].first, "2 ");
    if (!pair_here) {
      name = lines[i].first;
      if (starts_with(name, "0 ")) name = name.substr(2);
      name = trim(name);
      const std::string w = where_of(source, lines[i].second);
      if (i + 1 >= lines.size()) fail(w, "name line '" + name + "' is not followed by TLE line 1");
      if (!starts_with(lines[i + 1].first, "1 "))
        fail(where_of(source, lines[i + 1].second),
             "expected TLE line 1 (starting with '1 ') after the name line '" + name + "', got '" +
                 lines[i + 1].first.substr(0, 24) + "'");
      ++i;
    }
    if (i + 1 >= lines.size() || !starts_with(lines[i + 1].first, "2 "))
      fail(i + 1 < lines.size() ? where_of(source, lines[i + 1].second) : where_of(source, lines[i].second),
           "expected TLE line 2 (starting with '2 ') after TLE line 1");
    out.push_back(parse_tle_at(lines[i].first, lines[i + 1].first, name, where_of(source, lines[i].second),
                               where_of(source, lines[i + 1].second), true));
    i += 2;
  }
  return out;
}

}  // namespace

int decode_catalog_number(const std::string& field) {
  std::string t = field;
  while (!t.empty() && t.back() == ' ') t.pop_back();
  ZEN_ENFORCE(!t.empty() && t.size() <= 5, "catalog number '" + field + "' must be 1..5 characters");
  while (t.size() < 5) t.insert(t.begin(), ' ');
  int lead = 0;
  const char c0 = t[0];
  if (c0 == ' ' || (c0 >= '0' && c0 <= '9')) {
    lead = c0 == ' ' ? 0 : c0 - '0';
  } else if (c0 >= 'A' && c0 <= 'Z' && c0 != 'I' && c0 != 'O') {
    lead = 10 + (c0 - 'A') - (c0 > 'I' ? 1 : 0) - (c0 > 'O' ? 1 : 0);
  } else {
    ZEN_THROW(Result::InvalidArgument, "catalog number '" + field + "' is neither digits nor alpha-5");
  }
  int rest = 0;
  for (int k = 1; k < 5; ++k) {
    const char c = t[k] == ' ' ? '0' : t[k];
    ZEN_ENFORCE(c >= '0' && c <= '9', "catalog number '" + field + "' is neither digits nor alpha-5");
    rest = rest * 10 + (c - '0');
  }
  return lead * 10000 + rest;
}

std::string encode_catalog_number(int number) {
  ZEN_ENFORCE(number >= 0 && number <= 339999,
              "catalog number " + std::to_string(number) + " is outside 0..339999 (alpha-5 range)");
  char buf[8];
  if (number < 100000) {
    std::snprintf(buf, sizeof(buf), "%05d", number);
    return buf;
  }
  const int lead = number / 10000;  // 10..33
  char c = static_cast<char>('A' + (lead - 10));
  if (c >= 'I') ++c;
  if (c >= 'O') ++c;
  std::snprintf(buf, sizeof(buf), "%c%04d", c, number % 10000);
  return buf;
}

MeanElements parse_tle(const std::string& line1, const std::string& line2, const std::string& name,
                       bool verify_checksum) {
  return parse_tle_at(line1, line2, name, "TLE line 1", "TLE line 2", verify_checksum);
}

std::vector<MeanElements> parse_elements_text(const std::string& text, const std::string& source_name) {
  std::string body = text;
  if (body.size() >= 3 && body.compare(0, 3, "\xEF\xBB\xBF") == 0) body.replace(0, 3, "   ");  // UTF-8 BOM
  size_t k = 0;
  while (k < body.size() && std::isspace(static_cast<unsigned char>(body[k]))) ++k;
  std::vector<MeanElements> out;
  if (k < body.size() && (body[k] == '[' || body[k] == '{')) {
    out = parse_omm_json(body, source_name);
  } else {
    const std::vector<std::string> lines = split_lines(body);
    size_t first = 0;
    while (first < lines.size() && trim(lines[first]).empty()) ++first;
    const bool csv = first < lines.size() && lines[first].find(',') != std::string::npos &&
                     (lines[first].find("NORAD_CAT_ID") != std::string::npos ||
                      lines[first].find("MEAN_MOTION") != std::string::npos);
    out = csv ? parse_omm_csv(lines, first, source_name) : parse_tle_text(lines, source_name);
  }
  if (out.empty()) fail(source_name, "no element sets found (expected TLE lines, OMM JSON or OMM CSV)");
  return out;
}

std::vector<MeanElements> read_elements(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZEN_ENFORCE(in.good(), "read_elements: cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_elements_text(ss.str(), path);
}

}  // namespace zen::orbit
