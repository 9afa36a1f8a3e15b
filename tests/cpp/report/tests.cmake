# tests/cpp/report/tests.cmake -- the formatter tests parse JSON with nlohmann/json.
target_link_libraries(test_report PRIVATE vramscope_json)

# A long synthetic recording for the HTML report's size and time check and docs/benchmarks.md.
add_executable(make_big_recording ${CMAKE_CURRENT_LIST_DIR}/make_big_recording.cpp)
target_link_libraries(make_big_recording PRIVATE vramscope_core)
vramscope_warnings(make_big_recording)
