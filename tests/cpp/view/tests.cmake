# tests/cpp/view/tests.cmake -- extras of test_view: golden path, the fake agent, the tmux e2e test
#
# The goldens are found through $VRAMSCOPE_TEST_DATA (set by CTest); the compiled-in source path
# lets the executable also run by hand from any folder.
target_compile_definitions(test_view PRIVATE
                           VRAMSCOPE_SOURCE_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data")

# A stand-in trainer that publishes one agent segment for its own pid (for the e2e test).
add_executable(top_fake_agent ${CMAKE_CURRENT_LIST_DIR}/top_fake_agent.cpp)
target_link_libraries(top_fake_agent PRIVATE vramscope::layers)
vramscope_warnings(top_fake_agent)

# `vramscope top` in a real terminal (tmux) against the NVML double; needs the CLI.
if(TARGET vramscope AND TARGET vramscope_nvml_double)
  add_test(NAME e2e.top_tmux
           COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/top_tmux.sh $<TARGET_FILE:vramscope>
                   $<TARGET_FILE:top_fake_agent> $<TARGET_FILE:vramscope_nvml_double>)
  set_tests_properties(e2e.top_tmux PROPERTIES LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
