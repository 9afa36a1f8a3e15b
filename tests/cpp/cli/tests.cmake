# tests/cpp/cli/tests.cmake -- the CLI tests run the real binary, driven by the NVML test double.
#
# The binary's and the double's paths are compiled into test_cli; without either (VRAMSCOPE_CLI
# off, no double) the tests that need them skip themselves.
target_sources(test_cli PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cli_runner.cpp)
target_link_libraries(test_cli PRIVATE vramscope_json)
target_compile_definitions(
  test_cli PRIVATE "VRAMSCOPE_CLI_PATH=\"$<$<TARGET_EXISTS:vramscope>:$<TARGET_FILE:vramscope>>\"")
if(COMMAND vramscope_use_nvml_double)
  vramscope_use_nvml_double(test_cli)
else()
  target_compile_definitions(test_cli PRIVATE "VRAMSCOPE_NVML_DOUBLE_PATH=\"\"")
endif()

# Deferred to the end of tests/cpp so that the order of add_subdirectory() calls never matters.
function(_vramscope_cli_test_dependencies)
  if(TARGET vramscope)
    add_dependencies(test_cli vramscope)
  endif()
endfunction()
cmake_language(DEFER CALL _vramscope_cli_test_dependencies)
