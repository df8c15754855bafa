#include "zen/detail/parse.hpp"

#include <cmath>
#include <stdexcept>

#include "zen/error.hpp"

namespace zen::detail {

std::vector<double> parse_doubles(const std::string& text, char sep, const std::string& what) {
  std::vector<double> v;
  for (size_t p = 0;;) {
    const size_t q = std::min(text.find(sep, p), text.size());
    const std::string field = text.substr(p, q - p);
    size_t used = 0;
    double d = 0;
    try {
      d = std::stod(field, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ZEN_ENFORCE(!field.empty() && used == field.size() && std::isfinite(d), what);
    v.push_back(d);
    if (q == text.size()) return v;
    p = q + 1;
  }
}

}  // namespace zen::detail
