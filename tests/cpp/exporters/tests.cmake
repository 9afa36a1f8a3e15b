# tests/cpp/exporters/tests.cmake -- the exporter tests find their goldens without depending on
# the CTest environment (so the executable also works when run by hand).
target_compile_definitions(test_exporters PRIVATE VRAMSCOPE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
