# tests/cpp/cli/tests.cmake -- the CLI tests run the real binary, driven by the NVML test double.
#
# The binary's and the double's paths are compiled into test_cli. The double is declared by
# another test area whose tests.cmake may come after this one, so the wiring is deferred to the
# end of tests/cpp; without either target the tests that need it skip themselves.
target_sources(test_cli PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cli_runner.cpp)
target_link_libraries(test_cli PRIVATE vramscope_json)
target_compile_definitions(
  test_cli
  PRIVATE "VRAMSCOPE_CLI_PATH=\"$<$<TARGET_EXISTS:vramscope>:$<TARGET_FILE:vramscope>>\""
          "VRAMSCOPE_NVML_DOUBLE_PATH=\"$<$<TARGET_EXISTS:vramscope_nvml_double>:$<TARGET_FILE:vramscope_nvml_double>>\"")

function(_vramscope_cli_test_dependencies)
  foreach(target vramscope vramscope_nvml_double)
    if(TARGET ${target})
      add_dependencies(test_cli ${target})
    endif()
  endforeach()
endfunction()
cmake_language(DEFER CALL _vramscope_cli_test_dependencies)
