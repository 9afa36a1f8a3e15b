# tests/cpp/report/tests.cmake -- the formatter tests parse JSON with nlohmann/json.
target_link_libraries(test_report PRIVATE vramscope_json)
