#pragma once
/// Contact windows between constellation satellites and the parameter server, and the earliest
/// feasible contact (EFC) primitive.
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <optional>
#include <vector>

#include "zen/orbit/link.hpp"
#include "zen/orbit/visibility.hpp"

namespace zen::orbit {

/// One visibility window of satellite `sat` with server endpoint `peer` (index in Scenario::servers).
struct Window {
  int sat = 0;
  int peer = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  double max_dist_m = 0.0;      ///< worst-case (largest) distance within the window
  bool open_at_start = false;   ///< visible already at t = 0 (start clipped to 0)
  bool open_at_end = false;     ///< still visible at the horizon (end clipped to the horizon)
  double duration_s() const noexcept { return end_s - start_s; }
};

/// Result of a first-window / EFC query: a transfer of duration delta in window `window_index`
/// of satellite `sat` runs from start_s to completion_s = start_s + delta <= window_end_s.
struct Contact {
  int sat = 0;
  int peer = 0;
  std::size_t window_index = 0;  ///< index into ContactPlan::windows(sat)
  double start_s = 0.0;          ///< max(t, window start)
  double completion_s = 0.0;     ///< start_s + delta
  double window_start_s = 0.0;
  double window_end_s = 0.0;
  double max_dist_m = 0.0;       ///< the window's worst-case distance
  double remaining_s() const noexcept { return window_end_s - completion_s; }
};

/// The EFC order: a before b when it completes earlier; ties go to the longer remaining window, then
/// to the lower satellite id.
inline bool efc_before(const Contact& a, const Contact& b) noexcept {
  if (a.completion_s != b.completion_s) return a.completion_s < b.completion_s;
  if (a.remaining_s() != b.remaining_s()) return a.remaining_s() > b.remaining_s();
  return a.sat < b.sat;
}

/// Window prediction settings. The scan steps by margin / margin_rate_bound (a step that provably
/// cannot jump over a visibility change, derived from the geometry), clamped to
/// [min_step_s, max_step_s]; each sign change is bisected to tolerance_s. Windows or gaps shorter
/// than min_step_s may be missed (only those).
struct PredictOptions {
  double horizon_s = 86400.0;
  double tolerance_s = 1e-3;  ///< edge accuracy (bracket width of the bisection)
  double min_step_s = 0.5;
  double max_step_s = 600.0;
  unsigned threads = 0;       ///< 0: std::thread::hardware_concurrency()
};

/// Windows of one (satellite, peer) pair over [0, horizon], sorted by start.
std::vector<Window> predict_pair_windows(const Geometry& geo, int sat, int peer,
                                         const PredictOptions& opt);

class ContactPlan {
 public:
  ContactPlan() = default;
  /// windows[sat] for sat in [0, num_satellites); sorted here by (start, peer).
  ContactPlan(std::vector<std::vector<Window>> windows, double horizon_s);

  /// Predicts all satellites' windows to every server endpoint (parallel over satellites).
  static ContactPlan predict(const Scenario& sc, const PredictOptions& opt = {});
  static ContactPlan predict(const Geometry& geo, const PredictOptions& opt = {});

  int num_satellites() const noexcept { return static_cast<int>(windows_.size()); }
  double horizon_s() const noexcept { return horizon_s_; }
  /// Windows of one satellite (all peers), sorted by start.
  const std::vector<Window>& windows(int sat) const;
  std::size_t total_windows() const noexcept;

  /// True if some window of `sat` contains t.
  bool visible(int sat, double t) const;
  /// First window of `sat` that can hold a transfer of duration delta starting at or after t:
  /// the earliest completion max(t, s) + delta <= e; ties (same completion) go to the longer
  /// remaining window. nullopt if none within the horizon.
  std::optional<Contact> first_window(int sat, double t, double delta) const;
  /// Same rule when the transfer time depends on the window and the start (e.g. the rate over the
  /// distance the transfer actually sees): completion(w, start) is the arrival of a transfer
  /// starting at `start` in w, or nullopt when it does not fit in w; every arrival is at least
  /// start + min_delta (a lower bound, used only to stop the search early).
  using CompletionFn = std::function<std::optional<double>(const Window& w, double start_s)>;
  std::optional<Contact> first_window(int sat, double t, const CompletionFn& completion, double min_delta = 0.0) const;
  /// EFC over a set of satellites: the earliest completion of first_window over `sats`; ties go
  /// to the longest remaining window, then to the lowest satellite id.
  std::optional<Contact> earliest_contact(const std::vector<int>& sats, double t, double delta) const;

  /// Total time [s] in [0, horizon] during which `sat` sees at least one server endpoint.
  double visible_time(int sat) const;
  double visible_fraction(int sat) const { return horizon_s_ > 0 ? visible_time(sat) / horizon_s_ : 0.0; }
  /// Largest max_dist_m over all of a satellite's windows (0 if none).
  double max_distance(int sat) const;

  /// CSV with header sat,plane,slot,peer,start_s,end_s,max_dist_m (plane/slot from the scenario).
  void write_csv(std::ostream& os, const Scenario& sc) const;

 private:
  std::vector<std::vector<Window>> windows_;
  std::vector<std::vector<double>> prefix_max_end_;  // per sat: max end over windows[0..k]
  double horizon_s_ = 0.0;
};

/// Link over a window at its worst-case (largest) distance: rate and bits / R + d / c.
double window_rate_bps(const LinkPreset& p, const Window& w);
double window_transfer_time_s(const LinkPreset& p, double bits, const Window& w);
/// Mean Shannon rate over the window as the geometry changes: (integral of R(d(t)) dt) / duration
/// (trapezoid, step_s).
double window_mean_rate_bps(const LinkPreset& p, const Geometry& geo, const Window& w, double step_s = 1.0);
/// Transfer of `bits` starting at t_start inside window w with the rate integrated over the
/// changing distance; arrival time (incl. d/c) or nullopt if the arrival is after w.end_s.
std::optional<double> window_integrated_transfer_end(const LinkPreset& p, const Geometry& geo, const Window& w,
                                                     double t_start, double bits, double step_s = 1.0);

}  // namespace zen::orbit
