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

namespace vramscope::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool address_space_limit_works = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
inline constexpr bool address_space_limit_works = false;
#else
inline constexpr bool address_space_limit_works = true;
#endif
#else
inline constexpr bool address_space_limit_works = true;
#endif

/// Limits this process's address space to `bytes` (nothing under a sanitizer).
inline void limit_address_space(uint64_t bytes) {
  if constexpr (address_space_limit_works) {
    const rlimit limit{bytes, bytes};
    ::setrlimit(RLIMIT_AS, &limit);
  }
}

}  // namespace vramscope::testing
