# cmake/VramscopeThirdParty.cmake -- header-only libraries as INTERFACE targets, and zstd.
#
# Everything here but zstd is used header-only so that the CLI binary needs no shared library
# beyond libc, libstdc++, ncurses and libzstd, and so that the core can be built where only
# headers are carried (VRAMSCOPE_THIRD_PARTY_INCLUDE names an extra folder to search, e.g. on a machine with no registry).

set(VRAMSCOPE_THIRD_PARTY_INCLUDE "$ENV{VRAMSCOPE_THIRD_PARTY_INCLUDE}" CACHE PATH
    "Extra include folder holding nlohmann/, fmt/, CLI/, httplib.h")

function(_vramscope_header_lib target header)
  find_path(_dir_${target} ${header} HINTS ${VRAMSCOPE_THIRD_PARTY_INCLUDE})
  if(NOT _dir_${target})
    message(FATAL_ERROR "vramscope: ${header} not found. On Debian: tools/install-deps.sh "
                        "(or set VRAMSCOPE_THIRD_PARTY_INCLUDE).")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE ${_dir_${target}})
endfunction()

_vramscope_header_lib(vramscope_json nlohmann/json.hpp)
_vramscope_header_lib(vramscope_fmt fmt/format.h)
target_compile_definitions(vramscope_fmt INTERFACE FMT_HEADER_ONLY=1)

find_package(Threads REQUIRED)

# zstd compresses recording chunks (src/format/packed_chunk.cpp): the one shared library the core
# links beyond libc, because a format must not depend on a copy of a compressor kept here.
find_path(VRAMSCOPE_ZSTD_INCLUDE_DIR zstd.h HINTS ${VRAMSCOPE_THIRD_PARTY_INCLUDE})
find_library(VRAMSCOPE_ZSTD_LIBRARY NAMES zstd)
if(NOT VRAMSCOPE_ZSTD_INCLUDE_DIR OR NOT VRAMSCOPE_ZSTD_LIBRARY)
  message(FATAL_ERROR "vramscope: zstd not found; install libzstd-dev (Debian/Ubuntu), libzstd-devel (Fedora) or zstd (conda).")
endif()
add_library(vramscope_zstd UNKNOWN IMPORTED GLOBAL)
set_target_properties(vramscope_zstd PROPERTIES IMPORTED_LOCATION ${VRAMSCOPE_ZSTD_LIBRARY}
                                                INTERFACE_INCLUDE_DIRECTORIES ${VRAMSCOPE_ZSTD_INCLUDE_DIR})

if(VRAMSCOPE_CLI)
  _vramscope_header_lib(vramscope_cli11 CLI/CLI.hpp)
  _vramscope_header_lib(vramscope_httplib httplib.h)
  set(CURSES_NEED_NCURSES TRUE)
  set(CURSES_NEED_WIDE TRUE)
  find_package(Curses REQUIRED)
endif()

if(VRAMSCOPE_TEST)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(VRAMSCOPE_BENCH)
  find_package(benchmark REQUIRED)
endif()
