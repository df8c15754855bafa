// Constants and the angle wrap shared by the near-Earth (sgp4.cpp) and deep-space (sgp4_deep.cpp)
// halves of the propagator; private to src/orbit.
#pragma once

#include <cmath>

#include "zen/orbit/constants.hpp"

namespace zen::orbit::sgp4_terms {

constexpr double kX2o3 = 2.0 / 3.0;
// Lunar and solar constants of the deep-space theory (Spacetrack Report #3, DEEP).
constexpr double kZes = 0.01675, kZel = 0.05490;       // solar / lunar eccentricity
constexpr double kZns = 1.19459e-5, kZnl = 1.5835218e-4;  // solar / lunar mean motion [rad/min]
constexpr double kRptim = 4.37526908801129966e-3;      // Earth rotation [rad/min]

inline double wrap(double x) { return std::fmod(x, kTwoPi); }  // C fmod semantics: keeps the sign

}  // namespace zen::orbit::sgp4_terms
