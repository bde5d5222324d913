# Compiler flags for the libFuzzer build (QFOLD_FUZZ=ON), included from the top-level
# CMakeLists.txt before any target is defined: the whole project is instrumented for
# coverage (fuzzer-no-link) and ASan+UBSan; only the fuzz targets link libFuzzer's main
# (tests/fuzz/CMakeLists.txt adds -fsanitize=fuzzer to them).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "QFOLD_FUZZ=ON needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++")
endif()
if(QFOLD_SANITIZE)
  message(FATAL_ERROR "QFOLD_FUZZ already enables ASan+UBSan; leave QFOLD_SANITIZE off")
endif()
set(QFOLD_FUZZ_SANITIZERS address,undefined)
add_compile_options(-fsanitize=fuzzer-no-link,${QFOLD_FUZZ_SANITIZERS}
                    -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=${QFOLD_FUZZ_SANITIZERS})
