#pragma once
// Progress of the long-running tools (zen_perf sweeps, zen_trace generators, zen_orbit fl/compare) on
// stderr: shown when stderr is a terminal, silent otherwise (CI logs, pipes, files). ZEN_PROGRESS=1
// forces it on (one line per update instead of an in-place line), ZEN_PROGRESS=0 off. Under mpirun
// only the rank that passes `enabled = true` (rank 0) shows it.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zen::tools {

class Progress {
 public:
  Progress(std::string tool, uint64_t total, bool enabled = true) : tool_(std::move(tool)), total_(total) {
    const char* env = std::getenv("ZEN_PROGRESS");
    tty_ = isatty(STDERR_FILENO) == 1;
    if (env && std::string(env) == "0") on_ = false;
    else if (env && std::string(env) == "1") on_ = true;
    else on_ = tty_;
    on_ = on_ && enabled;
    t0_ = last_ = std::chrono::steady_clock::now();
  }
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void set_total(uint64_t total) { total_ = total; }
  uint64_t done() const { return done_; }
  /// One more unit done; `what` names it (shown at most every 0.1 s on a terminal, always when forced).
  void step(const std::string& what = "") { update(++done_, what); }
  /// Absolute position.
  void update(uint64_t done, const std::string& what = "") {
    done_ = done;
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (tty_ && done_ < total_ && std::chrono::duration<double>(now - last_).count() < 0.1) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - t0_).count();
    char head[96];
    if (total_) std::snprintf(head, sizeof head, "[%s] %llu/%llu (%.0f%%) %.1f s", tool_.c_str(),
                              static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_),
                              100.0 * static_cast<double>(done_) / static_cast<double>(total_), s);
    else std::snprintf(head, sizeof head, "[%s] %llu %.1f s", tool_.c_str(), static_cast<unsigned long long>(done_), s);
    if (tty_) std::fprintf(stderr, "\r\033[K%s %s", head, what.c_str());
    else std::fprintf(stderr, "%s %s\n", head, what.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  /// Clear the in-place line (terminal) so that the tool's own output starts on a clean line.
  void finish() {
    if (on_ && tty_ && shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  std::string tool_;
  uint64_t total_ = 0, done_ = 0;
  bool on_ = false, tty_ = false, shown_ = false;
  std::chrono::steady_clock::time_point t0_, last_;
};

}  // namespace zen::tools
