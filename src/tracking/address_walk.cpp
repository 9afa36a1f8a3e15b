// src/tracking/address_walk.cpp -- the mappings that may hold device memory (see address_walk.hpp)
#include "vramscope/tracking/address_walk.hpp"

#include <exception>
#include <sstream>

namespace vramscope::tracking {

std::vector<AddressRange> device_candidate_ranges(const std::string& maps_text) {
  std::vector<AddressRange> ranges;
  std::istringstream lines(maps_text);
  std::string line;
  while (std::getline(lines, line)) {
    // "begin-end perms offset dev inode [path]"
    std::istringstream fields(line);
    std::string span;
    std::string perms;
    std::string offset;
    std::string dev;
    std::string inode;
    std::string path;
    if (!(fields >> span >> perms >> offset >> dev >> inode)) continue;
    std::getline(fields >> std::ws, path);
    if (!path.empty() && path.rfind("/dev/nvidia", 0) != 0) continue;
    const std::size_t dash = span.find('-');
    if (dash == std::string::npos) continue;
    try {
      AddressRange range{std::stoull(span.substr(0, dash), nullptr, 16),
                         std::stoull(span.substr(dash + 1), nullptr, 16)};
      if (range.end > range.begin) ranges.push_back(range);
    } catch (const std::exception&) {
      continue;  // not a mapping line
    }
  }
  return ranges;
}

}  // namespace vramscope::tracking
