# Cross-compiling for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu:
#   cmake -S . -B build-aarch64 -G Ninja -DQFOLD_RUNTIME_ONLY=ON \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# flatc runs on the build machine; the flatbuffers headers are header-only, so
# the host's copy (libflatbuffers-dev) is used through QFOLD_HOST_FLATBUFFERS_INCLUDE,
# and the unit tests' doctest (doctest-dev) through QFOLD_HOST_DOCTEST_INCLUDE.
# scripts/test_aarch64.sh builds the unit tests this way and runs them under qemu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(QFOLD_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${QFOLD_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${QFOLD_CROSS_TRIPLE}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${QFOLD_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Run target binaries (try_run, ctest) under qemu when it is installed.
find_program(QFOLD_QEMU qemu-${CMAKE_SYSTEM_PROCESSOR})
if(QFOLD_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${QFOLD_QEMU} -L /usr/${QFOLD_CROSS_TRIPLE})
endif()

# Expose only the host's header-only dependencies, each through a folder holding
# one symbolic link (flatbuffers/, doctest/ for the tests), not all of
# /usr/include, so no other host header can shadow the cross sysroot's.
set(QFOLD_HOST_FLATBUFFERS_INCLUDE /usr/include CACHE PATH
    "Folder holding the host's flatbuffers/ headers")
set(QFOLD_HOST_DOCTEST_INCLUDE /usr/include CACHE PATH
    "Folder holding the host's doctest/ headers (tests only)")
set(_qfold_fb_dir ${CMAKE_BINARY_DIR}/host-flatbuffers)
if(NOT EXISTS ${_qfold_fb_dir}/flatbuffers)
  file(MAKE_DIRECTORY ${_qfold_fb_dir})
  file(CREATE_LINK ${QFOLD_HOST_FLATBUFFERS_INCLUDE}/flatbuffers ${_qfold_fb_dir}/flatbuffers
       SYMBOLIC)
endif()
set(CMAKE_CXX_FLAGS_INIT "-isystem ${_qfold_fb_dir}")
# tests/CMakeLists.txt makes doctest::doctest from this folder instead of find_package,
# which the root path settings above keep inside the sysroot.
set(QFOLD_HOST_DOCTEST_DIR ${CMAKE_BINARY_DIR}/host-doctest)
if(EXISTS ${QFOLD_HOST_DOCTEST_INCLUDE}/doctest AND NOT EXISTS ${QFOLD_HOST_DOCTEST_DIR}/doctest)
  file(MAKE_DIRECTORY ${QFOLD_HOST_DOCTEST_DIR})
  file(CREATE_LINK ${QFOLD_HOST_DOCTEST_INCLUDE}/doctest ${QFOLD_HOST_DOCTEST_DIR}/doctest SYMBOLIC)
endif()
