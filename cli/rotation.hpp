// cli/rotation.hpp -- `record --max-size/--rotate`: shifting FILE to FILE.1 ... FILE.N
#pragma once

#include <string>

namespace vramscope::cli {

/// Moves `path` to `path`.1, `path`.1 to `path`.2 and so on up to `path`.`keep`, removing what
/// was `path`.`keep`, so that `path` is free for the next recording. Names are renamed or removed
/// as names: a symlink planted at any of them is moved or removed itself, never followed, and
/// nothing is written through one (the next recording is created with O_EXCL|O_NOFOLLOW).
/// A name that exists but is not a regular file or symlink (a directory, a FIFO) is refused.
/// `keep` = 0 removes `path`. Throws vramscope::Error naming the file on failure.
void rotate_recordings(const std::string& path, unsigned keep);

}  // namespace vramscope::cli
