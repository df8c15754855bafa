#pragma once
// Shared fixtures of the zen::fl::sim tests: the reference scenario, its contact plan and helpers.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "zen/fl/dataset.hpp"
#include "zen/fl/federation.hpp"
#include "zen/fl/sim/timing.hpp"
#include "zen/orbit/contact.hpp"
#include "zen/orbit/scenario.hpp"

namespace zen::fl::sim::test {

/// The tiny Fashion-MNIST sample shipped in tests/data, split over the 40 reference satellites.
inline const Dataset& tiny_train() {
  static const Dataset d = load_fashion_mnist(ZEN_FL_TINY_DIR, "train");
  return d;
}
inline const Dataset& tiny_test() {
  static const Dataset d = load_fashion_mnist(ZEN_FL_TINY_DIR, "t10k");
  return d;
}
inline const Federation& tiny_federation() {
  static const Federation f = [] {
    FederationConfig c;
    c.num_clients = 40;
    return Federation(tiny_train(), tiny_test(), c);
  }();
  return f;
}

inline const orbit::Scenario& reference() {
  static const orbit::Scenario sc = orbit::Scenario::named("reference");
  return sc;
}
inline const orbit::ContactPlan& reference_plan() {
  static const orbit::ContactPlan plan = [] {
    orbit::PredictOptions o;
    o.horizon_s = 2.0 * 86400.0;
    return orbit::ContactPlan::predict(reference(), o);
  }();
  return plan;
}

/// Delivered events of a kind in a round (sync) / update attribution-free.
inline std::vector<const Event*> events_of(const Schedule& s, EventKind k, int round = -1, bool failed = false) {
  std::vector<const Event*> out;
  for (const Event& e : s.events)
    if (e.kind == k && e.failed == failed && (round < 0 || e.round == round)) out.push_back(&e);
  return out;
}

inline std::vector<int> all_clients(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

/// Checks that every update's delivered uploads cover its members exactly once (no loss inside
/// the schedule, no double counting).
inline void expect_uploads_partition_members(const Schedule& s) {
  std::map<int, std::vector<int>> per_round;  // sync: round -> uploaded members
  for (const Event& e : s.events)
    if (e.kind == EventKind::Upload && !e.failed)
      per_round[e.round].insert(per_round[e.round].end(), e.members.begin(), e.members.end());
  for (const UpdateRecord& u : s.updates) {
    std::vector<int> got = per_round[u.round];
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, u.members) << "round " << u.round;
  }
}

}  // namespace zen::fl::sim::test
