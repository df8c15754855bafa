#pragma once
// Text to numbers for option and spec parsers (zen_perf's --auto-cpu, the orbit scenario's server
// spec): one rule for what a number in a list is.
#include <string>
#include <vector>

namespace zen::detail {

/// `text` split at `sep` into doubles, every field a whole finite number (no empty field, nothing
/// left over: "1x" and "1,,2" are refused). Throws Error(InvalidArgument) with `what` otherwise.
std::vector<double> parse_doubles(const std::string& text, char sep, const std::string& what);

}  // namespace zen::detail
