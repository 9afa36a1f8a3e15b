// tests/cpp/layers/upward_call.cpp -- calls up from core: it must neither compile nor link against core alone
//
// open_sampler() is backends': declared on backends' include path
// (src/backends/include/vramscope/backends/open_sampler.hpp) and defined in src/backends. Built
// with core's include path, this must stop at the #include, naming the layer; given backends'
// include path but linked with vramscope::core only, it must end with an undefined reference
// (tests.cmake beside this file).
#include "vramscope/backends/open_sampler.hpp"

int main() { return vramscope::open_sampler() ? 0 : 1; }
