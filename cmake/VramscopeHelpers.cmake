# cmake/VramscopeHelpers.cmake -- warnings, sanitizers and vramscope_add_test(), used by every CMakeLists.txt

# Warnings we want on every target of ours (never on third-party code).
function(vramscope_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                           -Wno-sign-conversion -Wnon-virtual-dtor)
endfunction()

# Sanitizers apply to the whole tree so that the tests link exactly the code that ships.
if(VRAMSCOPE_SANITIZE)
  string(REPLACE ";" "," _vramscope_san "${VRAMSCOPE_SANITIZE}")
  add_compile_options(-fsanitize=${_vramscope_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_vramscope_san})
endif()

# A fuzzing build (tools/fuzz.sh, a build folder of its own) instruments every library for
# libFuzzer's coverage and ASan+UBSan, so that the fuzz targets link the layers like any program
# instead of compiling a hand-picked list of their sources again (such a list missed core's clock
# once the segment writer used it).
if(VRAMSCOPE_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# vramscope_add_test(NAME name SOURCES a.cpp b.cpp [LIBS extra...] [LABELS l...])
# Declares one gtest executable and registers each of its tests with CTest (gtest_discover_tests).
function(vramscope_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE vramscope::layers GTest::gtest GTest::gtest_main ${T_LIBS})
  vramscope_warnings(${T_NAME})
  # gtest_discover_tests flattens PROPERTIES into one key/value list, so a property can hold one
  # value only: a second label would be read as a property name and swallow ENVIRONMENT. Each
  # test gets the area label (ctest -L core); every test here is a C++ test anyway.
  set(_label cpp)
  if(T_LABELS)
    list(GET T_LABELS 0 _label)
  endif()
  gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${_label}
                       ENVIRONMENT "VRAMSCOPE_TEST_DATA=${PROJECT_SOURCE_DIR}/tests/data")
endfunction()
