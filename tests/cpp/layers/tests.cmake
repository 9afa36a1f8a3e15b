# tests/cpp/layers/tests.cmake -- the layer order of src/CMakeLists.txt holds at #include and at link time.
#
# Includes: a layer's sources see only its own headers and those of the layers it declares
# (cmake/VramscopeLayers.cmake), so building the layers is the include check itself; the probe
# below shows that it bites.
# layers.upward_include_fails_to_compile: a program including backends' open_sampler.hpp, built
#   with core's include path only, must stop at that #include with the header's path (and so
#   the layer's name) in the error.
# layers.<layer>_links_alone: every object of the layer (whole archive) linked into an empty
#   program with only the layers it declares beneath it. A call into a layer above it -- or into
#   a sibling it does not declare -- is an undefined reference there, and the test fails.
# layers.upward_call_fails_to_link: the same program, given backends' include path but linked
#   with core alone, must fail with the undefined reference to open_sampler(), so the check above
#   is known to bite (and core's link interface is known not to carry backends); the program
#   linked with backends must build (layers.downward_call_links), so both failures are the
#   layering's, not the probe's.
# The programs are built by the tests (EXCLUDE_FROM_ALL), one at a time: they share the build tree.
if(CMAKE_VERSION VERSION_LESS 3.24)
  message(STATUS "tests/cpp/layers: needs CMake 3.24 ($<LINK_LIBRARY:WHOLE_ARCHIVE>); skipped")
  return()
endif()

function(_vramscope_layer_link_test test target expect_regex)
  add_test(NAME ${test} COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ${target})
  set_tests_properties(${test} PROPERTIES LABELS layers RESOURCE_LOCK vramscope_build_tree
                                          TIMEOUT 300)
  if(expect_regex)
    set_tests_properties(${test} PROPERTIES PASS_REGULAR_EXPRESSION "${expect_regex}")
  endif()
endfunction()

get_property(_vramscope_layers GLOBAL PROPERTY VRAMSCOPE_LAYERS)
foreach(layer IN LISTS _vramscope_layers)
  add_executable(layer_alone_${layer} EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/alone.cpp)
  target_link_libraries(layer_alone_${layer} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,vramscope_${layer}>")
  _vramscope_layer_link_test(layers.${layer}_links_alone layer_alone_${layer} "")
endforeach()

add_executable(layer_upward_include EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/upward_call.cpp)
target_link_libraries(layer_upward_include PRIVATE vramscope::core)
# GCC says "<header>: No such file or directory", clang "'<header>' file not found".
_vramscope_layer_link_test(layers.upward_include_fails_to_compile layer_upward_include
                           "vramscope/backends/open_sampler\\.hpp'?:? (No such file|file not found)")

add_executable(layer_upward_call EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/upward_call.cpp)
target_link_libraries(layer_upward_call PRIVATE vramscope::core)
target_include_directories(layer_upward_call PRIVATE ${PROJECT_SOURCE_DIR}/src/backends/include)
# GNU ld and gold say "undefined reference to `...'", lld "undefined symbol: ...".
_vramscope_layer_link_test(layers.upward_call_fails_to_link layer_upward_call
                           "undefined (reference to .|symbol: )vramscope::open_sampler")

add_executable(layer_downward_call EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/upward_call.cpp)
target_link_libraries(layer_downward_call PRIVATE vramscope::backends)
_vramscope_layer_link_test(layers.downward_call_links layer_downward_call "")
