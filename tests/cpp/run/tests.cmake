# tests/cpp/run/tests.cmake -- `vramscope run`'s pure helpers, tested in the CLI library the binary ships.
target_link_libraries(test_run PRIVATE vramscope_cli)
