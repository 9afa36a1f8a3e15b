# tests/cpp/nvml_double/nvml_double.cmake -- the scripted NVML library, in four symbol variants
#
# Targets (shared libraries, loaded with VRAMSCOPE_NVML_LIBRARY=$<TARGET_FILE:...>):
#   vramscope_nvml_double           every symbol (the one other tests normally want)
#   vramscope_nvml_double_nov2      no _v2/_v3 symbols: the fallbacks to the unversioned names
#   vramscope_nvml_double_min       only the mandatory v1 names
#   vramscope_nvml_double_nocount   no nvmlDeviceGetCount: a mandatory symbol missing
# vramscope_use_nvml_double(<target>) makes <target> depend on all four and defines
# VRAMSCOPE_NVML_DOUBLE_PATH (and _NOV2_PATH, _MIN_PATH, _NOCOUNT_PATH) as string literals.
# Included once from tests/cpp/CMakeLists.txt (before the test areas) and from bench/.
include_guard(GLOBAL)

set(_vramscope_nvml_double_dir ${CMAKE_CURRENT_LIST_DIR})

function(_vramscope_nvml_double_variant name)
  add_library(${name} SHARED ${_vramscope_nvml_double_dir}/nvml_double.cpp
                             ${_vramscope_nvml_double_dir}/nvml_double_script.cpp)
  target_compile_definitions(${name} PRIVATE ${ARGN})
  target_link_libraries(${name} PRIVATE vramscope_json)
  # Only the NVML names (and the test hooks) are exported: dlsym must see exactly those.
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
                                           LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/nvml_double)
  vramscope_warnings(${name})
endfunction()

_vramscope_nvml_double_variant(vramscope_nvml_double)
_vramscope_nvml_double_variant(vramscope_nvml_double_nov2 VRAMSCOPE_NVML_DOUBLE_VERSIONED=0)
_vramscope_nvml_double_variant(vramscope_nvml_double_min VRAMSCOPE_NVML_DOUBLE_VERSIONED=0
                                                         VRAMSCOPE_NVML_DOUBLE_OPTIONAL=0)
_vramscope_nvml_double_variant(vramscope_nvml_double_nocount VRAMSCOPE_NVML_DOUBLE_COUNT=0)

# vramscope_use_nvml_double(target): the double's paths as compile definitions of `target`.
function(vramscope_use_nvml_double target)
  add_dependencies(${target} vramscope_nvml_double vramscope_nvml_double_nov2 vramscope_nvml_double_min
                   vramscope_nvml_double_nocount)
  target_compile_definitions(${target} PRIVATE
      VRAMSCOPE_NVML_DOUBLE_PATH="$<TARGET_FILE:vramscope_nvml_double>"
      VRAMSCOPE_NVML_DOUBLE_NOV2_PATH="$<TARGET_FILE:vramscope_nvml_double_nov2>"
      VRAMSCOPE_NVML_DOUBLE_MIN_PATH="$<TARGET_FILE:vramscope_nvml_double_min>"
      VRAMSCOPE_NVML_DOUBLE_NOCOUNT_PATH="$<TARGET_FILE:vramscope_nvml_double_nocount>"
      VRAMSCOPE_NVML_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data/nvml")
endfunction()
