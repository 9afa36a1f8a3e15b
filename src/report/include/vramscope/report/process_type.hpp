// src/report/include/vramscope/report/process_type.hpp -- nvidia-smi's process type letters (C, G, M, C+G...)
#pragma once

#include <cstdint>
#include <string>

#include "vramscope/sample.hpp"

namespace vramscope::report {

/// "C" compute, "G" graphics, "M" MPS, joined by '+' when a pid is in several lists; "-" for none.
inline std::string process_type_text(uint8_t kinds) {
  std::string text;
  const auto add = [&](ProcessKind kind, const char* letter) {
    if ((kinds & kind) == 0) return;
    if (!text.empty()) text += '+';
    text += letter;
  };
  add(ProcessKindCompute, "C");
  add(ProcessKindGraphics, "G");
  add(ProcessKindMps, "M");
  return text.empty() ? std::string("-") : text;
}

}  // namespace vramscope::report
