// tests/cpp/format/memory_limit.hpp -- an address-space limit for the process that calls it, so
// that a test of a bounded reader fails (std::bad_alloc) where memory would grow with a forged
// input instead of passing slowly on a large machine
//
// Call it in a child (EXPECT_EXIT, or before exec'ing the CLI): the limit cannot be lifted
// again. Sanitizer runtimes reserve terabytes of address space up front, so under a sanitizer
// the limit is not set and the tests check only what the code says (the error, the numbers).
#pragma once

#include <sys/resource.h>

#include <cstdint>

#include "build_limits.hpp"

namespace vramscope::testing {

/// Does an address-space limit hold here (not under a sanitizer)?
inline constexpr bool address_space_limit_works = !sanitized_build;

/// Limits this process's address space to `bytes` (nothing under a sanitizer).
inline void limit_address_space(uint64_t bytes) {
  if constexpr (address_space_limit_works) {
    const rlimit limit{bytes, bytes};
    ::setrlimit(RLIMIT_AS, &limit);
  }
}

}  // namespace vramscope::testing
