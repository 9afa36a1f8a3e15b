# tests/cpp/run/tests.cmake -- `vramscope run`'s pure helpers live in cli/, outside the core library.
target_sources(test_run PRIVATE ${PROJECT_SOURCE_DIR}/cli/run_python.cpp)
target_include_directories(test_run PRIVATE ${PROJECT_SOURCE_DIR}/cli)
