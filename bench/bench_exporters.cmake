# bench/bench_exporters.cmake -- shares the exporter tests' sample fixtures and loopback client.
target_include_directories(bench_exporters PRIVATE ${PROJECT_SOURCE_DIR}/tests/cpp/exporters)
