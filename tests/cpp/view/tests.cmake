# tests/cpp/view/tests.cmake -- extras of test_view: where the golden frames live
#
# The goldens are found through $VRAMSCOPE_TEST_DATA (set by CTest); the compiled-in source path
# lets the executable also run by hand from any folder.
target_compile_definitions(test_view PRIVATE
                           VRAMSCOPE_SOURCE_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data")
