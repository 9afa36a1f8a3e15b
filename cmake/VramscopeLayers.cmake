# cmake/VramscopeLayers.cmake -- one static library per src/ folder, linking only the layers beneath it
#
# vramscope_layer(<name> [DEPS <layer>...] [LIBS <third-party target>...])
#   Declares the layer src/<name>/ and the layers it may call (docs/architecture.md draws them).
#   With VRAMSCOPE_CORE on it also defines the library vramscope_<name> (alias vramscope::<name>)
#   from every .cpp of the folder. DEPS are PUBLIC (a layer's headers use its deps' types), LIBS
#   PRIVATE. Nothing of a higher layer is ever on a layer's link interface, so a call upward
#   leaves an undefined symbol in any program that links the lower layer alone: tests/cpp/layers
#   links each layer that way and fails on such a call.
#   Nor on its include path: a layer's headers are src/<name>/include/vramscope/<name>/*.hpp,
#   and that folder is the only one it adds (PUBLIC), so a file sees the headers of its own layer
#   and of the layers it declares, and an #include "vramscope/<layer>/..." of any other layer
#   fails to compile with that layer's name in the message (tests/cpp/layers checks it bites).
#
# vramscope_layer_variant(<name> SUFFIX <s> ABI <0|1>)
#   Defines vramscope_<name>_<s> and the same variant of every layer beneath it: the layer's
#   sources that include no third-party header, compiled with _GLIBCXX_USE_CXX11_ABI=<ABI> and
#   hidden visibility. This is what the torch agent links (agent/CMakeLists.txt): torch fixes the
#   libstdc++ ABI of every object in the extension, the extension exports nothing but its init
#   function, and an agent-only build (VRAMSCOPE_CLI=OFF, the GPU machine) has no fmt, json or
#   zstd headers. The sources left out are never what the agent calls (the recording codec, the
#   network exporters): a static archive contributes only the objects a program references.
include_guard(GLOBAL)

# Headers of third-party libraries (cmake/VramscopeThirdParty.cmake): a source that includes one
# needs that library, so it is not part of a layer's third-party-free variant. Scanning sources
# is enough because no header of a layer or of include/ includes a third-party header: keep it
# so (a layer uses its libraries in its .cpp files, privately).
set(VRAMSCOPE_THIRD_PARTY_INCLUDE_REGEX "^#include <(zstd\\.h|fmt/|nlohmann/|CLI/)")

# The include folders of layer `name` on `target`: the layer's own, and for core (beneath every
# layer) also include/, the library's public API.
function(_vramscope_layer_includes target name)
  if(EXISTS ${PROJECT_SOURCE_DIR}/src/${name}/include)
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src/${name}/include)
  endif()
  if(name STREQUAL "core")
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  endif()
endfunction()

function(vramscope_layer name)
  cmake_parse_arguments(L "" "" "DEPS;LIBS" ${ARGN})
  foreach(dep IN LISTS L_DEPS)
    get_property(_known GLOBAL PROPERTY VRAMSCOPE_LAYER_${dep} DEFINED)
    if(NOT _known)
      # Declaration order is the layer order: a layer can only name one declared before it.
      message(FATAL_ERROR "layer ${name}: ${dep} is not a layer declared beneath it")
    endif()
  endforeach()
  define_property(GLOBAL PROPERTY VRAMSCOPE_LAYER_${name} BRIEF_DOCS "layer deps" FULL_DOCS "-")
  set_property(GLOBAL PROPERTY VRAMSCOPE_LAYER_${name} "${L_DEPS}")
  set_property(GLOBAL APPEND PROPERTY VRAMSCOPE_LAYERS ${name})
  if(NOT VRAMSCOPE_CORE)
    return()
  endif()
  file(GLOB_RECURSE _sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(vramscope_${name} STATIC ${_sources})
  add_library(vramscope::${name} ALIAS vramscope_${name})
  _vramscope_layer_includes(vramscope_${name} ${name})
  list(TRANSFORM L_DEPS PREPEND vramscope_ OUTPUT_VARIABLE _dep_targets)
  target_link_libraries(vramscope_${name} PUBLIC ${_dep_targets} PRIVATE ${L_LIBS})
  vramscope_warnings(vramscope_${name})
endfunction()

function(vramscope_layer_variant name)
  cmake_parse_arguments(V "" "SUFFIX;ABI" "" ${ARGN})
  set(_target vramscope_${name}_${V_SUFFIX})
  if(TARGET ${_target})
    return()
  endif()
  get_property(_deps GLOBAL PROPERTY VRAMSCOPE_LAYER_${name})
  foreach(dep IN LISTS _deps)
    vramscope_layer_variant(${dep} SUFFIX ${V_SUFFIX} ABI ${V_ABI})
  endforeach()
  file(GLOB_RECURSE _all CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  set(_sources "")
  foreach(src IN LISTS _all)
    file(STRINGS ${src} _third_party REGEX "${VRAMSCOPE_THIRD_PARTY_INCLUDE_REGEX}" LIMIT_COUNT 1)
    if(NOT _third_party)
      list(APPEND _sources ${src})
    endif()
  endforeach()
  add_library(${_target} STATIC ${_sources})
  list(TRANSFORM _deps PREPEND vramscope_ OUTPUT_VARIABLE _dep_targets)
  list(TRANSFORM _dep_targets APPEND _${V_SUFFIX})
  target_link_libraries(${_target} PUBLIC ${_dep_targets})
  _vramscope_layer_includes(${_target} ${name})
  target_compile_definitions(${_target} PUBLIC _GLIBCXX_USE_CXX11_ABI=${V_ABI})
  if(NOT _deps)
    target_link_libraries(${_target} PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
  endif()
  # Hidden, like the nanobind module itself: with default visibility every function of ours the
  # extension calls is exported and, being interposable, called through the PLT -- the tracker's
  # hot path made two such calls per allocator event (three while streaming), each an indirect
  # jump through the GOT. Hidden symbols are called directly (or inlined), and the module
  # exports only PyInit__agent.
  set_target_properties(${_target} PROPERTIES CXX_VISIBILITY_PRESET hidden
                                              VISIBILITY_INLINES_HIDDEN ON)
  vramscope_warnings(${_target})
endfunction()
