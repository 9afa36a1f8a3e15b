# cmake/VramscopeThirdParty.cmake -- header-only libraries as INTERFACE targets.
#
# Everything here is used header-only so that the CLI binary needs no shared library beyond
# libc, libstdc++ and ncurses, and so that the core can be built where only headers are carried
# (VRAMSCOPE_THIRD_PARTY_INCLUDE names an extra folder to search, e.g. on a machine with no registry).

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
