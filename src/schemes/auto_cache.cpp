// Scheme auto's decision cache: reading and appending its lines (auto_cache.hpp).
#include "auto_cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "zen/detail/mix64.hpp"

namespace zen::detail {
namespace {

constexpr const char* kMagic = "zen-auto-cache";
constexpr int kFormat = 1;

std::string hex16(uint64_t x) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, x);
  return b;
}

bool parse_hex16(const std::string& s, uint64_t& x) {
  if (s.size() != 16) return false;
  x = 0;
  for (char ch : s) {
    int d;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    else if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    else return false;
    x = (x << 4) | static_cast<uint64_t>(d);
  }
  return true;
}

/// The values as written (seconds with 9 significant digits: what a reader parses back exactly).
std::string values(const CachedChoice& c) {
  char b[64];
  std::snprintf(b, sizeof b, " %.9g %" PRIu64, c.seconds, c.rows);
  return c.scheme + b;
}

}  // namespace

uint64_t CachedChoice::scheme_code() const {
  return fnv1a(scheme.data(), scheme.size()) | 1;  // never 0 (0: no entry)
}

std::string DecisionCache::line(uint64_t key, const CachedChoice& c) {
  const std::string body = std::string(kMagic) + " " + std::to_string(kFormat) + " " + hex16(key) + " " + values(c);
  return body + " " + hex16(fnv1a(body.data(), body.size())) + "\n";
}

DecisionCache::DecisionCache(std::string path) : path_(std::move(path)) {
  std::ifstream f(path_);
  std::string text;
  while (std::getline(f, text)) {
    const size_t cut = text.rfind(' ');
    uint64_t check = 0, key = 0;
    std::istringstream in(cut == std::string::npos ? std::string() : text.substr(0, cut));
    std::string magic, key_hex, extra;
    int format = 0;
    CachedChoice c;
    const bool ok = cut != std::string::npos && parse_hex16(text.substr(cut + 1), check) &&
                    check == fnv1a(text.data(), cut) && (in >> magic >> format >> key_hex >> c.scheme >> c.seconds >> c.rows) &&
                    !(in >> extra) && magic == kMagic && format == kFormat && parse_hex16(key_hex, key) &&
                    std::isfinite(c.seconds) && c.seconds > 0;
    if (!ok) {
      ++skipped_;
      continue;
    }
    entries_[key] = std::move(c);
  }
}

const CachedChoice* DecisionCache::find(uint64_t key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

std::string DecisionCache::add(uint64_t key, const CachedChoice& c) {
  entries_[key] = c;
  const std::string l = line(key, c);
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return path_ + ": " + std::strerror(errno);
  const ssize_t w = ::write(fd, l.data(), l.size());  // one write: concurrent appenders do not interleave lines
  const int err = errno;
  ::close(fd);
  if (w < 0) return path_ + ": " + std::strerror(err);
  if (static_cast<size_t>(w) != l.size()) return path_ + ": short write (" + std::to_string(w) + " of " + std::to_string(l.size()) + " bytes)";
  return "";
}

}  // namespace zen::detail
