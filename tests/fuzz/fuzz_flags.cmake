# Compiler flags for the libFuzzer build (QFOLD_FUZZ=ON), included from the top-level
# CMakeLists.txt before any target is defined: the whole project is instrumented for
# coverage (fuzzer-no-link); only the fuzz targets link libFuzzer's main
# (tests/fuzz/CMakeLists.txt adds -fsanitize=fuzzer to them).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "QFOLD_FUZZ=ON needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++")
endif()
# The libFuzzer build is also the ASan+UBSan build whose tests scripts/test.sh runs
# (one sanitizer build instead of two): QFOLD_SANITIZE=ON brings the sanitizers and
# -O1 (top-level CMakeLists.txt), this adds coverage instrumentation and debug info.
if(NOT QFOLD_SANITIZE OR QFOLD_SANITIZE STREQUAL "thread")
  message(FATAL_ERROR "QFOLD_FUZZ=ON needs QFOLD_SANITIZE=ON (ASan+UBSan)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link -g)
