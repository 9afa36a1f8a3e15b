// cli/atomic_file.hpp -- writing a whole output file safely: owner-only, never through a symlink
#pragma once

#include <string>
#include <string_view>

namespace vramscope::cli {

/// Writes `content` as the file `path` (mode 0600). It is written to a new temporary file in
/// the same directory (mkstemp: O_EXCL, so nothing planted there is followed), synced, then
/// moved into place: readers see the old file or the whole new one, never a part. An existing
/// `path` is refused unless `overwrite`; then it is replaced (a symlink itself, not its target).
/// Throws vramscope::Error naming the path.
void write_file_atomically(const std::string& path, std::string_view content, bool overwrite);

}  // namespace vramscope::cli
