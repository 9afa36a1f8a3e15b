# tests/cpp/format/tests.cmake -- the generator of the checked-in compatibility recording.
# `make_v5_small OUT` writes tests/data/recordings/v5_small.vsrec (docs/recording-format.md).
add_executable(make_v5_small ${CMAKE_CURRENT_SOURCE_DIR}/format/make_v5_small.cpp)
target_link_libraries(make_v5_small PRIVATE vramscope::layers)
target_include_directories(make_v5_small PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
vramscope_warnings(make_v5_small)

# The data folder is compiled in as well: gtest_discover_tests' ENVIRONMENT property does not reach
# the tests while LABELS holds a list (the POST_BUILD discovery flattens it).
target_compile_definitions(test_format PRIVATE
                           VRAMSCOPE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
                           VRAMSCOPE_BUNDLED_DATA_DIR="${PROJECT_SOURCE_DIR}/data")

# Steady-state bytes and writer CPU per sample, for docs/benchmarks.md (`recording_bytes IN OUT N`).
add_executable(recording_bytes ${CMAKE_CURRENT_SOURCE_DIR}/format/recording_bytes.cpp)
target_link_libraries(recording_bytes PRIVATE vramscope::layers)
vramscope_warnings(recording_bytes)

# The packed-chunk tests build hostile zstd frames themselves.
target_link_libraries(test_format PRIVATE vramscope_zstd)

# Under ThreadSanitizer the seqlock's synchronisation must be visible to it: GCC warns (-Wtsan)
# at every atomic_thread_fence, which TSan does not model. As an error here, a fence in the
# seqlock of agent_segment_layout.hpp (which these tests instantiate) fails the TSan build.
if("thread" IN_LIST VRAMSCOPE_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
   AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/format/test_agent_segment.cpp
                              PROPERTIES COMPILE_OPTIONS -Werror=tsan)
endif()

# The hostile recordings of forge_recording.hpp, written to a folder (`forge_recordings DIR`): to
# try a CLI by hand, or as fuzz seeds.
add_executable(forge_recordings ${CMAKE_CURRENT_SOURCE_DIR}/format/forge_recordings.cpp)
target_link_libraries(forge_recordings PRIVATE vramscope::layers)
target_include_directories(forge_recordings PRIVATE ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
vramscope_warnings(forge_recordings)
