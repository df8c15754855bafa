#pragma once
// Comma-separated option values of zen_orbit's subcommands (fl and compare: --schemes, --presets;
// sweep: every grid axis).
#include <string>
#include <vector>

namespace zen_orbit_cli {

/// The items of a comma-separated list, empty ones dropped; drop_spaces: spaces are removed too
/// (sweep's axes, "1, 2" = "1,2"), else they stay part of an item.
inline std::vector<std::string> split_list(const std::string& s, bool drop_spaces = false) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ' || !drop_spaces) {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace zen_orbit_cli
