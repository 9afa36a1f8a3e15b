// tests/cpp/layers/upward_call.cpp -- calls up from core: it must not link against core alone
//
// open_sampler() is declared in the public API (include/vramscope/sampler.hpp) but defined in
// src/backends. Linked with vramscope::core only, this must end with an undefined reference:
// if it links, core has come to carry a layer above it (tests.cmake beside this file).
#include "vramscope/sampler.hpp"

int main() { return vramscope::open_sampler() ? 0 : 1; }
