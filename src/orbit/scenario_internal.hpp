#pragma once
// What the scenario's three sources share (scenario.cpp, constellation.cpp, scenario_json.cpp): the
// default MEO server and the plane count of a satellite list.
#include <vector>

#include "zen/orbit/scenario.hpp"

namespace zen::orbit::detail {

/// The reference scenarios' server: a satellite on a 20,000 km circular orbit.
ServerNode meo_server();

/// Planes used by `sats` (the largest plane index + 1).
int count_planes(const std::vector<Satellite>& sats);

}  // namespace zen::orbit::detail
