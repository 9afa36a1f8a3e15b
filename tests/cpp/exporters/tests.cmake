# tests/cpp/exporters/tests.cmake -- the exporter tests find their goldens without depending on
# the CTest environment (so the executable also works when run by hand).
target_compile_definitions(test_exporters PRIVATE VRAMSCOPE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")

# Driven by tests/python/test_tensorboard.py and test_prometheus.py (found via VRAMSCOPE_BUILD_DIR).
add_executable(exporters_fixture ${CMAKE_CURRENT_LIST_DIR}/exporters_fixture.cpp)
target_link_libraries(exporters_fixture PRIVATE vramscope::layers)
target_include_directories(exporters_fixture PRIVATE ${CMAKE_CURRENT_LIST_DIR})
vramscope_warnings(exporters_fixture)
