// libFuzzer target: the orbit scenario config reader (Scenario::from_json_text). It must either throw
// zen::Error or return a scenario that passes validate() and survives a to_json_text round trip.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zen/error.hpp"
#include "zen/orbit/scenario.hpp"

#define CHECK(c) \
  do {           \
    if (!(c)) std::abort(); \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  zen::orbit::Scenario sc;
  try {
    sc = zen::orbit::Scenario::from_json_text(text);
  } catch (const zen::Error&) {
    return 0;
  }
  sc.validate();  // a scenario the reader accepted must be valid (throws -> uncaught -> finding)
  const zen::orbit::Scenario back = zen::orbit::Scenario::from_json_text(sc.to_json_text());
  CHECK(back.num_satellites() == sc.num_satellites() && back.servers.size() == sc.servers.size());
  return 0;
}
