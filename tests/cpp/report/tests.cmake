# tests/cpp/report/tests.cmake -- the formatter tests parse JSON with nlohmann/json; the row-file
# tests share the exporters' samples and golden helpers (tests/cpp/exporters/), which find
# tests/data without the CTest environment.
target_link_libraries(test_report PRIVATE vramscope_json)
target_compile_definitions(test_report PRIVATE VRAMSCOPE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")

# A long synthetic recording for the HTML report's size and time check and docs/benchmarks.md.
add_executable(make_big_recording ${CMAKE_CURRENT_LIST_DIR}/make_big_recording.cpp)
target_link_libraries(make_big_recording PRIVATE vramscope::layers)
vramscope_warnings(make_big_recording)

# `vramscope report` pages in headless Chromium (skipped without chromium); needs the CLI. Not in
# the sanitizer builds: the test holds the report to a time limit that an instrumented CLI cannot
# meet (it timed out under ASan after 300 s), and what it checks is the page, not memory safety
# (the report code's own unit tests run under both sanitizers).
if(TARGET vramscope AND NOT VRAMSCOPE_SANITIZE)
  add_test(NAME e2e.report_chromium
           COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/report_chromium.sh $<TARGET_FILE:vramscope>
                   $<TARGET_FILE:make_big_recording> ${CMAKE_CURRENT_BINARY_DIR}/report_chromium)
  set_tests_properties(e2e.report_chromium PROPERTIES LABELS e2e SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
