// src/format/include/vramscope/format/segment_dir.hpp -- the owner-only directory that holds agent segments
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vramscope::format {

/// Opens `dir` as a directory fd (O_DIRECTORY | O_NOFOLLOW) after checking that it is ours:
/// owned by the effective uid and not writable by group or others. With `create`, a missing
/// directory is created with mode 0700 (its parent must exist) and an existing one of ours that
/// others may list is made 0700. Returns -1 and sets `error` to one line when the directory is
/// missing or unsafe (an unsafe one's message says how to use another: VRAMSCOPE_SHM_DIR);
/// `missing`, when given, tells the two apart.
int open_segment_dir(const std::string& dir, bool create, std::string& error,
                     bool* missing = nullptr);

/// File name of the segment of `pid`: "agent-<pid>.seg".
std::string segment_file_name(uint32_t pid);

/// The pid in a segment file name, or empty when `name` is not "agent-<digits>.seg".
std::optional<uint32_t> parse_segment_file_name(std::string_view name);

}  // namespace vramscope::format
