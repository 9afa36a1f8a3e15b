// src/format/include/vramscope/format/byte_source.hpp -- the bytes of a recording, read in large blocks through a bounded window
//
// A recording holds one chunk per flush: thousands of chunks of a few dozen bytes each. Reading
// each with its own fstat and two preads made the system calls, not the samples, the cost of
// reading a file (3 calls a chunk). A ByteSource keeps a window of the file in memory and refills
// it with one pread of read_block_bytes (or of the chunk asked for, when that is larger), so a
// sequential reader makes one call per block. The window never holds more than one block or one
// chunk (each at most max_chunk_payload_bytes), so memory stays bounded whatever the file says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace vramscope::format {

/// Bytes read from a file by one refill of the window, when no more is asked for.
inline constexpr std::size_t read_block_bytes = std::size_t{1} << 20U;

/// Where the bytes of a recording come from: a file or memory. Nothing is cached about the end:
/// a file that grows (a recording still being written) is seen growing.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Current size of the data (a file's is asked again at each call).
  virtual uint64_t size() = 0;
  /// Copies up to `size` bytes at `offset` into `out`; fewer only at the end of the data.
  virtual std::size_t read_at(uint64_t offset, char* out, std::size_t size) = 0;
  /// Up to `size` bytes at `offset`, fewer only at the end of the data; the view is valid until
  /// the next call on this source. Served from the window when it holds them all; otherwise the
  /// window is refilled from `offset` with at least `size` bytes (one pread for a file).
  virtual std::string_view view(uint64_t offset, std::size_t size) = 0;

  /// A source over the open regular file `fd`, which it closes; `path` names it in messages.
  static std::unique_ptr<ByteSource> file(std::string path, int fd);
  /// A source over bytes held in memory (tests, fuzzing); views point into them, no copy.
  static std::unique_ptr<ByteSource> memory(std::string bytes);
};

}  // namespace vramscope::format
