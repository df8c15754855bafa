// `zen_orbit propagate`: SGP4 TEME position and velocity of every element set of a TLE / OMM file
// on a time grid, as CSV.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "zen/error.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/orbit/sgp4.hpp"
#include "zen/orbit/time.hpp"
#include "zen/orbit/tle.hpp"

namespace zen_orbit_cli {

namespace zo = zen::orbit;

namespace {

struct PropagateArgs {
  std::string tle, start, out;
  double minutes = 0.0, step = 60.0;
};

// TEME states of every element set of a file at start + k * step, k = 0 .. floor(minutes * 60 / step).
int cmd_propagate(const PropagateArgs& p) {
  ZEN_ENFORCE(std::isfinite(p.minutes) && p.minutes >= 0.0, "--minutes must be >= 0, got " + std::to_string(p.minutes));
  ZEN_ENFORCE(std::isfinite(p.step) && p.step > 0.0, "--step must be positive, got " + std::to_string(p.step));
  const std::vector<zo::MeanElements> els = zo::read_elements(p.tle);
  const auto [jd0, fr0] = zo::elements_start(els, p.start);
  const double nsteps = std::floor(p.minutes * 60.0 / p.step + 1e-9);
  ZEN_ENFORCE(nsteps < 1e8, "--minutes / --step gives " + std::to_string(nsteps) + " steps (too many)");
  const long steps = static_cast<long>(nsteps);
  std::ofstream file;
  if (!p.out.empty() && p.out != "-") {
    file.open(p.out);
    ZEN_CHECK_CODE(file.good(), zen::Result::SystemError, "cannot write '" + p.out + "'");
  }
  std::ostream& os = file.is_open() ? static_cast<std::ostream&>(file) : std::cout;
  os << "sat,name,catalog,t_s,utc,x_km,y_km,z_km,vx_km_s,vy_km_s,vz_km_s\n";
  char buf[400];
  for (std::size_t k = 0; k < els.size(); ++k) {
    const zo::Sgp4 model(els[k]);
    std::string name = els[k].name;
    std::replace(name.begin(), name.end(), ',', ' ');
    for (long i = 0; i <= steps; ++i) {
      const double t = static_cast<double>(i) * p.step;
      const zo::SatState st = zo::sgp4_state(model, static_cast<int>(k), jd0, fr0, t);
      std::snprintf(buf, sizeof buf, "%zu,%s,%d,%.3f,%s,%.9f,%.9f,%.9f,%.12f,%.12f,%.12f\n", k, name.c_str(),
                    els[k].catalog_number, t, zo::format_utc(jd0, fr0 + t / 86400.0).c_str(), st.r_m.x() / 1e3,
                    st.r_m.y() / 1e3, st.r_m.z() / 1e3, st.v_m_s.x() / 1e3, st.v_m_s.y() / 1e3, st.v_m_s.z() / 1e3);
      os << buf;
    }
  }
  os.flush();
  ZEN_CHECK_CODE(os.good(), zen::Result::SystemError, "write to '" + (p.out.empty() ? std::string("stdout") : p.out) + "' failed");
  std::fprintf(stderr, "%zu satellites, %ld steps of %.3f s from %s (TEME, SGP4 WGS-72)\n", els.size(), steps + 1,
               p.step, zo::format_utc(jd0, fr0).c_str());
  return 0;
}

}  // namespace

Command add_propagate_command(CLI::App& app) {
  auto pra = std::make_shared<PropagateArgs>();
  auto* propagate = app.add_subcommand("propagate", "SGP4 TEME position and velocity of every element set (CSV)");
  propagate->add_option("--tle", pra->tle, "TLE / OMM (JSON or CSV) file")->required();
  propagate->add_option("--start", pra->start, "UTC of t = 0 (default: the earliest epoch in the file)");
  propagate->add_option("--minutes", pra->minutes, "span [min]")->required();
  propagate->add_option("--step", pra->step, "step [s]")->capture_default_str();
  propagate->add_option("--out", pra->out, "CSV output file (default: stdout)");
  return {propagate, [pra] { return cmd_propagate(*pra); }};
}

}  // namespace zen_orbit_cli
