#pragma once
/// Physical constants of the orbit module (values from docs/orbit.md / the reference simulator).

namespace zen::orbit {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2.0 * kPi;
constexpr double kDegToRad = kPi / 180.0;
constexpr double kRadToDeg = 180.0 / kPi;

constexpr double kEarthRadius = 6371.0e3;          ///< r_E [m], spherical Earth used for all geometry
constexpr double kEarthMu = 3.986004418e14;        ///< mu [m^3/s^2]
constexpr double kEarthRotation = 7.2921150e-5;    ///< omega_E [rad/s], sidereal rotation rate
constexpr double kSpeedOfLight = 3.0e8;            ///< c [m/s], rounded as in the reference code
constexpr double kBoltzmann = 1.380649e-23;        ///< k_B [J/K]
constexpr double kJ2 = 1.08262668e-3;              ///< J2 zonal harmonic
constexpr double kEarthEquatorialRadius = 6378.137e3;  ///< R_eq [m], only used in the J2 rates

}  // namespace zen::orbit
