// include/vramscope/version.hpp -- the one place the project version lives
//
// CMake and the Python package (scikit-build-core's regex provider) both read the version from
// the line below, so it has a single source.
#pragma once

#define VRAMSCOPE_VERSION "0.1.0"

namespace vramscope {
/// The project version, e.g. "0.1.0".
inline constexpr const char* version = VRAMSCOPE_VERSION;
}  // namespace vramscope
