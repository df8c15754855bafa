// `zen_orbit links`: every plane's ISL ring, the server links' geometric bound and worst observed
// distance, and the rate, SNR and transfer time of each link budget (presets and the scenario's own).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "scenario_args.hpp"
#include "zen/orbit/link.hpp"
#include "zen/orbit/sgp4.hpp"
#include "zen/orbit/visibility.hpp"

namespace zen_orbit_cli {

namespace {

int cmd_links(const ScenarioArgs& a, double bits) {
  const zo::Scenario sc = load(a);
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, predict_options(a));
  const double mask = sc.elevation_mask_deg * zo::kDegToRad;
  const double R = zo::kEarthRadius + sc.atmosphere_margin_m;
  std::printf("scenario %s: model %.0f bit, horizon %.3f days\n", sc.name.c_str(), bits, a.days);
  // Every plane's ring.
  std::printf("\nIntra-orbit ISL rings\n");
  std::vector<std::pair<std::string, double>> links;
  for (const zo::RingInfo& r : zo::ring_infos(sc)) {
    const double alt = sc.satellites[static_cast<std::size_t>(sc.plane_members(r.plane)[0])].orbit.altitude_m;
    std::printf("  plane %d: S=%d, h=%.1f km, neighbour distance %.1f km, chord clearance %.1f km, %s\n", r.plane,
                r.sats, alt / 1e3, r.neighbour_distance_m / 1e3, r.chord_clearance_m / 1e3,
                r.feasible ? "feasible" : "BLOCKED");
    if (r.sats > 1) links.push_back({"ISL plane " + std::to_string(r.plane), r.neighbour_distance_m});
  }
  std::printf("\nServer links (worst case = largest distance over all predicted windows)\n");
  const zo::Geometry geo(sc);
  for (int p = 0; p < static_cast<int>(sc.servers.size()); ++p) {
    const auto& srv = sc.servers[static_cast<std::size_t>(p)];
    double bound = 0.0, worst = 0.0;
    for (int k = 0; k < sc.num_satellites(); ++k) {
      double r_sat = geo.trajectory(k).radius();
      if (const zo::Sgp4* m = geo.sgp4(k)) {  // SGP4: the mean apoapsis radius, not the circle at the start
        const double n = m->elements().mean_motion_rev_per_day * zo::kTwoPi / 86400.0;
        r_sat = std::cbrt(zo::kEarthMu / (n * n)) * (1.0 + m->elements().eccentricity);
      }
      if (srv.kind == zo::ServerNode::Kind::Ground) {
        bound = std::max(bound, zo::max_slant_range(r_sat, zo::kEarthRadius + srv.station.alt_m, mask));
      } else {
        bound = std::max(bound, zo::tangent_distance(r_sat, srv.orbit.radius_m(), R));
      }
      for (const auto& w : plan.windows(k))
        if (w.peer == p) worst = std::max(worst, w.max_dist_m);
    }
    std::printf("  peer %d '%s' (%s): geometric bound %.1f km, worst observed %.1f km\n", p, srv.name.c_str(),
                srv.kind == zo::ServerNode::Kind::Ground ? "ground" : "satellite", bound / 1e3, worst / 1e3);
    for (const std::string& name : zo::LinkPreset::names()) {
      // Rate integrated over each closed window as the geometry changes vs its worst-case rate.
      const zo::LinkPreset lp = zo::LinkPreset::named(name);
      double sum_mean = 0.0, sum_worst = 0.0;
      int count = 0;
      for (int k = 0; k < sc.num_satellites(); ++k)
        for (const auto& w : plan.windows(k))
          if (w.peer == p && !w.open_at_start && !w.open_at_end) {
            sum_mean += zo::window_mean_rate_bps(lp, geo, w, 10.0);
            sum_worst += zo::window_rate_bps(lp, w);
            ++count;
          }
      if (count > 0)
        std::printf("    %s: over %d closed windows, mean integrated rate %.6f Mb/s vs mean worst-case rate %.6f Mb/s\n",
                    name.c_str(), count, sum_mean / count / 1e6, sum_worst / count / 1e6);
    }
    links.push_back({"server " + srv.name + " bound", bound});
    if (worst > 0.0) links.push_back({"server " + srv.name + " worst", worst});
  }
  std::vector<std::pair<std::string, zo::LinkPreset>> budgets;
  for (const std::string& name : zo::LinkPreset::names()) budgets.push_back({"Preset " + name, zo::LinkPreset::named(name)});
  if (sc.isl_link) budgets.push_back({"Scenario link isl", *sc.isl_link});
  if (sc.server_link) budgets.push_back({"Scenario link server", *sc.server_link});
  for (const auto& [title, lp] : budgets) {
    std::printf("\n%s: f=%.3g GHz, B=%.3g MHz, P=%.3g W, G=%.4g/%.4g (%.2f/%.2f dBi), T=%.1f K, losses %.2f dB, rate %s",
                title.c_str(), lp.frequency_hz / 1e9, lp.bandwidth_hz / 1e6, lp.tx_power_w, lp.gain_tx, lp.gain_rx,
                zo::to_db(lp.gain_tx), zo::to_db(lp.gain_rx), lp.noise_temp_k, lp.losses_db,
                zo::rate_model_name(lp.rate_model));
    if (lp.min_snr_db > -1e299) std::printf(", min SNR %.2f dB", lp.min_snr_db);
    std::printf("\n  %-28s %12s %10s %14s %12s %s\n", "link", "dist_km", "snr_db", "rate_Mbps", "time_s",
                lp.rate_model == zo::RateModel::DvbS2 ? "modcod" : "");
    for (const auto& [label, d] : links) {
      const zo::Modcod* m = lp.rate_model == zo::RateModel::DvbS2 ? zo::dvbs2_modcod(lp, d) : nullptr;
      std::printf("  %-28s %12.1f %10.2f %14.6f %12.6f %s\n", label.c_str(), d / 1e3, zo::to_db(zo::snr(lp, d)),
                  zo::rate_bps(lp, d) / 1e6, zo::transfer_time_s(lp, bits, d),
                  lp.rate_model != zo::RateModel::DvbS2 ? "" : (m ? m->name : "none"));
    }
  }
  return 0;
}

}  // namespace

Command add_links_command(CLI::App& app) {
  auto a = std::make_shared<ScenarioArgs>();
  auto bits = std::make_shared<double>(251200.0);
  auto* links = app.add_subcommand("links", "ISL and server link distances and rates per preset");
  add_scenario_options(links, *a, true);
  links->add_option("--bits", *bits, "model size in bits for transfer times")->capture_default_str();
  return {links, [a, bits] { return cmd_links(*a, *bits); }};
}

}  // namespace zen_orbit_cli
