# Helper functions for sluice's libraries, tests, benchmarks and fuzz targets.
include_guard(GLOBAL)

# sluice_library(NAME SRCS a.cc b.cc DEPS x y)
#   A static library sluice_<NAME> whose headers are included from src/.
function(sluice_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(sluice_${name} STATIC ${ARG_SRCS})
  target_include_directories(sluice_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(sluice_${name} PUBLIC ${ARG_DEPS})
  target_compile_options(sluice_${name} PRIVATE ${SLUICE_WARNINGS})
endfunction()

# sluice_test(NAME SRCS a_test.cc DEPS x LABELS unit [TIMEOUT s] [PROCESSORS n] [COST s])
#   A gtest binary registered with ctest under the given labels (unit, integration, slow).
#   Each gtest binary is one ctest test; use gtest filters inside for slow cases.
#   PROCESSORS: the slots of `ctest -j` it takes (docs/design/0029 decision 5): `make test`
#   runs twice as many slots as cores; a unit test keeps a core busy (2 slots), an
#   integration test mostly waits on its broker, clients and timeouts (1 slot).
#   COST: its seconds, for a long test, so a fresh build directory starts it first.
function(sluice_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;PROCESSORS;COST" "SRCS;DEPS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${SLUICE_WARNINGS} ${SLUICE_TEST_DEBUG})
  add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT ARG_PROCESSORS)
    if("unit" IN_LIST ARG_LABELS)
      set(ARG_PROCESSORS 2)
    else()
      set(ARG_PROCESSORS 1)
    endif()
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                       PROCESSORS ${ARG_PROCESSORS})
  if(ARG_COST)
    set_tests_properties(${name} PROPERTIES COST ${ARG_COST})
  endif()
endfunction()

# sluice_fuzz(NAME SRCS x_fuzz.cc DEPS x)
#   A libFuzzer target when SLUICE_FUZZ is on (clang); otherwise a replay binary that
#   runs the target over files given on the command line, so every target always builds.
function(sluice_fuzz name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  if(SLUICE_FUZZ)
    add_executable(${name} ${ARG_SRCS})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${name} ${ARG_SRCS} ${PROJECT_SOURCE_DIR}/fuzz/replay_main.cc)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  target_compile_options(${name} PRIVATE ${SLUICE_TEST_DEBUG})
endfunction()
