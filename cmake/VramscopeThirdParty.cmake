# cmake/VramscopeThirdParty.cmake -- header-only libraries as INTERFACE targets, ncursesw, zstd.
#
# Everything here but zstd is used header-only so that the CLI binary needs no shared library
# beyond libc, libstdc++, ncurses and libzstd (which compresses recordings: a format must not
# depend on a copy of a compressor kept here). Headers are searched in VRAMSCOPE_THIRD_PARTY_INCLUDE (an extra
# folder, e.g. on a machine with no registry), the system, and for nlohmann/json also the
# `nlohmann-json` package of the Python that builds (a PyPI build requirement, so that a source
# build needs no Debian package for it). What is still missing stops the configure with ONE line
# naming the packages to install on Debian/Ubuntu, Fedora and conda.
#
# The layer libraries (and so json, fmt and zstd) serve the CLI, the tests, the benchmarks and
# the fuzzers only: the agent links the torch variants of its layers, which leave out every
# source that includes one of these headers (cmake/VramscopeLayers.cmake), so an agent-only
# build (VRAMSCOPE_CLI=OFF) needs no third-party header at all.

set(VRAMSCOPE_THIRD_PARTY_INCLUDE "$ENV{VRAMSCOPE_THIRD_PARTY_INCLUDE}" CACHE PATH
    "Extra include folder holding nlohmann/, fmt/, CLI/")
option(VRAMSCOPE_STATIC_CURSES
       "Link ncursesw and tinfo statically into the CLI (the distributable wheel: tools/build-wheel.sh)" OFF)

# The include folder of the `nlohmann-json` Python package of the Python that builds
# (scikit-build-core sets Python_EXECUTABLE; pass it to a plain CMake build), found without
# importing the package (its __init__ needs importlib_resources, which a build need not have).
set(_vramscope_python_json_include "")
if(Python_EXECUTABLE)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
            "import importlib.util, os\ns = importlib.util.find_spec('nlohmann_json')\nprint(os.path.join(list(s.submodule_search_locations)[0], 'include') if s else '')"
    OUTPUT_VARIABLE _vramscope_python_json_include OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()

# Package names of each dependency, "debian|fedora|conda", for the one-line message.
set(_vramscope_pkg_json "nlohmann-json3-dev|json-devel|nlohmann_json")
set(_vramscope_pkg_fmt "libfmt-dev|fmt-devel|fmt")
set(_vramscope_pkg_cli11 "libcli11-dev|cli11-devel|cli11")
set(_vramscope_pkg_curses "libncurses-dev|ncurses-devel|ncurses")
set(_vramscope_pkg_zstd "libzstd-dev|libzstd-devel|zstd")
set(_vramscope_missing "")

# Defines the INTERFACE target `target` for `header`, or adds `pkg` to the missing list.
function(_vramscope_header_lib target header pkg)
  find_path(_dir_${target} ${header} HINTS ${VRAMSCOPE_THIRD_PARTY_INCLUDE} ${ARGN})
  if(NOT _dir_${target})
    set(_vramscope_missing ${_vramscope_missing} ${pkg} PARENT_SCOPE)
    return()
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE ${_dir_${target}})
endfunction()

if(VRAMSCOPE_CORE)
  _vramscope_header_lib(vramscope_json nlohmann/json.hpp ${_vramscope_pkg_json}
                        ${_vramscope_python_json_include})
  _vramscope_header_lib(vramscope_fmt fmt/format.h ${_vramscope_pkg_fmt})
  if(TARGET vramscope_fmt)
    target_compile_definitions(vramscope_fmt INTERFACE FMT_HEADER_ONLY=1)
  endif()
  # zstd packs recording chunks (src/format/packed_chunk.cpp). The wheel's static build links
  # libzstd.a too, for the reason given for ncursesw below.
  find_path(VRAMSCOPE_ZSTD_INCLUDE_DIR zstd.h HINTS ${VRAMSCOPE_THIRD_PARTY_INCLUDE})
  if(VRAMSCOPE_STATIC_CURSES)
    find_library(VRAMSCOPE_ZSTD_LIBRARY NAMES libzstd.a zstd)
  else()
    find_library(VRAMSCOPE_ZSTD_LIBRARY NAMES zstd)
  endif()
  if(NOT VRAMSCOPE_ZSTD_INCLUDE_DIR OR NOT VRAMSCOPE_ZSTD_LIBRARY)
    list(APPEND _vramscope_missing ${_vramscope_pkg_zstd})
  else()
    add_library(vramscope_zstd UNKNOWN IMPORTED GLOBAL)
    set_target_properties(vramscope_zstd PROPERTIES
                          IMPORTED_LOCATION ${VRAMSCOPE_ZSTD_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${VRAMSCOPE_ZSTD_INCLUDE_DIR})
  endif()
endif()

find_package(Threads REQUIRED)

if(VRAMSCOPE_CLI)
  _vramscope_header_lib(vramscope_cli11 CLI/CLI.hpp ${_vramscope_pkg_cli11})
  set(CURSES_NEED_NCURSES TRUE)
  set(CURSES_NEED_WIDE TRUE)
  find_package(Curses QUIET)
  if(NOT CURSES_FOUND)
    list(APPEND _vramscope_missing ${_vramscope_pkg_curses})
  elseif(VRAMSCOPE_STATIC_CURSES)
    # The wheel's binary carries ncursesw inside it: auditwheel would graft the shared library
    # but move the binary behind a Python shim that breaks `pip install --user` installs.
    find_library(VRAMSCOPE_NCURSESW_STATIC libncursesw.a)
    find_library(VRAMSCOPE_TINFO_STATIC libtinfo.a)
    if(NOT VRAMSCOPE_NCURSESW_STATIC)
      message(FATAL_ERROR "vramscope: VRAMSCOPE_STATIC_CURSES=ON needs libncursesw.a "
                          "(Debian/Ubuntu: libncurses-dev, Fedora: ncurses-static)")
    endif()
    set(CURSES_LIBRARIES ${VRAMSCOPE_NCURSESW_STATIC})
    if(VRAMSCOPE_TINFO_STATIC)
      list(APPEND CURSES_LIBRARIES ${VRAMSCOPE_TINFO_STATIC})
    endif()
  endif()
endif()

if(_vramscope_missing)
  set(_debian "")
  set(_fedora "")
  set(_conda "")
  foreach(_pkg IN LISTS _vramscope_missing)
    string(REPLACE "|" ";" _parts "${_pkg}")
    list(GET _parts 0 _d)
    list(GET _parts 1 _f)
    list(GET _parts 2 _c)
    string(APPEND _debian " ${_d}")
    string(APPEND _fedora " ${_f}")
    string(APPEND _conda " ${_c}")
  endforeach()
  # NOTICE prints the line as it is; FATAL_ERROR would wrap it (and the commands in it).
  message(NOTICE
    "vramscope: missing C++ headers or libraries; install them with: Debian/Ubuntu `apt install${_debian}`, "
    "Fedora `dnf install${_fedora}`, conda `conda install -c conda-forge${_conda}` "
    "(or build only the PyTorch agent: VRAMSCOPE_CLI=OFF pip install --no-build-isolation .)")
  message(FATAL_ERROR "vramscope: missing C++ headers or libraries (the line above names the packages)")
endif()

if(VRAMSCOPE_TEST)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(VRAMSCOPE_BENCH)
  find_package(benchmark REQUIRED)
endif()
