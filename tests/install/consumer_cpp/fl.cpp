// A user's program on the installed fl component (zen::orbit, zen::trace, zen::fl_sim): the orbital
// period at 550 km against Kepler's law, and tokenizing a line with the trace library's tokenizer.
#include <cmath>
#include <cstdio>

#include "zen/fl/sim/loopback_runner.hpp"
#include "zen/orbit/orbit.hpp"
#include "zen/trace/generators.hpp"

int main() {
  const double r = 6371e3 + 550e3, mu = 3.986004418e14;
  const double want = 2 * M_PI * std::sqrt(r * r * r / mu);
  const double got = zen::orbit::orbital_period(r);
  const auto tokens = zen::trace::tokenize("Don't panic, it's well-known.");
  zen::fl::sim::LearnRunner runner = zen::fl::sim::loopback_runner(2);
  const bool ok = std::fabs(got - want) < 1e-6 * want && tokens.size() == 6 && static_cast<bool>(runner);
  std::printf("consumer_fl: period %.3f s (Kepler %.3f s), %zu tokens: %s\n", got, want, tokens.size(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
