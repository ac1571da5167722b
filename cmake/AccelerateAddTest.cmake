# Test registration helpers.
#
#   accelerate_add_unit_test(<name> SOURCES <src>... [LABELS ...] [TIMEOUT s])
#     one process, started directly (no launcher): MPI runs as a world of one.
#   accelerate_add_mpi_test(<name> SOURCES <src>... NPROCS <n>... [LABELS ...] [TIMEOUT s] [OWN_MAIN])
#     one executable registered once per rank count as <name>_np<n>, run through
#     ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} <n> ${MPIEXEC_PREFLAGS}.
#
# Tests link the shared MPI test main (tests/common/mpi_test_main.cpp) unless
# OWN_MAIN is given. Exit code 77 (or the marker ACCELERATE_TEST_SKIPPED) marks
# a skip; PROCESSORS keeps `ctest -j` from oversubscribing the machine.

set(ACCELERATE_TEST_TIMEOUT 120 CACHE STRING "Default per-test timeout in seconds")

# Reuses the tests' precompiled LibTorch/MPI/gtest headers (tests/CMakeLists.txt)
# for a target compiled with the tests' flags and linked to the library.
function(accelerate_use_test_pch target)
  if(TARGET accelerate_test_pch)
    target_precompile_headers(${target} REUSE_FROM accelerate_test_pch)
    # The header includes gtest: its definitions must match for GCC to use it.
    target_link_libraries(${target} PRIVATE GTest::gtest)
  endif()
endfunction()

function(_accelerate_test_executable name own_main)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE AccelerateHPC::accelerate GTest::gtest)
  accelerate_use_test_pch(${name})
  if(NOT own_main)
    target_link_libraries(${name} PRIVATE accelerate_mpi_test_main)
  endif()
  # Tests may exercise private helpers (checking macros, wait logic).
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
endfunction()

function(_accelerate_test_properties test nprocs timeout labels)
  set_tests_properties(${test} PROPERTIES
    PROCESSORS ${nprocs}
    TIMEOUT ${timeout}
    LABELS "${labels}"
    SKIP_RETURN_CODE 77
    SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endfunction()

function(accelerate_add_unit_test name)
  cmake_parse_arguments(T "OWN_MAIN" "TIMEOUT" "SOURCES;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${ACCELERATE_TEST_TIMEOUT})
  endif()
  _accelerate_test_executable(${name} "${T_OWN_MAIN}" ${T_SOURCES})
  add_test(NAME ${name} COMMAND $<TARGET_FILE:${name}>)
  _accelerate_test_properties(${name} 1 ${T_TIMEOUT} "unit;${T_LABELS}")
endfunction()

function(accelerate_add_mpi_test name)
  cmake_parse_arguments(T "OWN_MAIN" "TIMEOUT" "SOURCES;NPROCS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${ACCELERATE_TEST_TIMEOUT})
  endif()
  if(NOT T_NPROCS)
    set(T_NPROCS 1 2 4)
  endif()
  _accelerate_test_executable(${name} "${T_OWN_MAIN}" ${T_SOURCES})
  foreach(n IN LISTS T_NPROCS)
    set(test ${name}_np${n})
    add_test(NAME ${test}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${MPIEXEC_PREFLAGS}
              $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
    _accelerate_test_properties(${test} ${n} ${T_TIMEOUT} "mpi;${T_LABELS}")
  endforeach()
endfunction()

# The label `gpu` marks the tests that exercise CUDA, NCCL or a CUDA device
# when one is visible (and skip those parts without one);
# tests/gpu/run.sh runs `ctest -L gpu` on a machine with a GPU.
