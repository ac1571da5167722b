# Test registration helpers.
#
#   accelerate_add_unit_test(<name> SOURCES <src>... [LABELS ...] [TIMEOUT s]
#                            [LINK <lib>...] [DEFINES <def>...] [STANDALONE] [OWN_MAIN])
#     one process, started directly (no launcher): MPI runs as a world of one.
#   accelerate_add_mpi_test(<name> SOURCES <src>... NPROCS <n>... [LABELS ...] [TIMEOUT s]
#                           [LINK <lib>...] [DEFINES <def>...] [STANDALONE] [OWN_MAIN])
#     registered once per rank count as <name>_np<n>, run through
#     ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} <n> ${MPIEXEC_PREFLAGS}.
#
# A test's file goes into the test bundle (below) unless it is STANDALONE or
# has its OWN_MAIN; LINK and DEFINES apply to whichever executable holds it.
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

# One executable for the test files that need nothing of their own. Every
# GCC compilation that includes the LibTorch headers spends about 8 s loading
# the 650 MB precompiled header, more than most test files cost to compile, so
# those files are compiled as a unity build (ACCELERATE_TEST_UNITY_BATCH files
# per compilation) into one executable; each registered test runs the
# GoogleTest suites of its own file (--gtest_filter), so names, labels, rank
# counts and timeouts stay per file. OWN_MAIN and STANDALONE tests (and every
# test when ACCELERATE_TEST_BUNDLE is OFF) keep an executable of their own:
# STANDALONE is for files whose global state would reach the other files'
# tests (a global test environment, interposed MPI functions).
option(ACCELERATE_TEST_BUNDLE "Compile the test files into one unity-built executable" ON)
set(ACCELERATE_TEST_UNITY_BATCH 8 CACHE STRING "Test files per compilation in the test bundle")
set(ACCELERATE_TEST_BUNDLE_TARGET accelerate_tests)

# Sets <out_var> to the --gtest_filter that selects the suites defined in
# <source>. Two bundled files may not share a suite name: the filter of one
# would run the other's tests.
function(_accelerate_test_filter out_var source)
  file(READ "${source}" _content)
  if(_content MATCHES "AddGlobalTestEnvironment")
    message(FATAL_ERROR "${source} adds a global test environment, which would reach every test "
                        "of the bundle; register it STANDALONE")
  endif()
  string(REGEX MATCHALL "\n[ \t]*(TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\\([ \t\n]*[A-Za-z_0-9]+"
         _matches "\n${_content}")
  set(_suites)
  foreach(_m IN LISTS _matches)
    string(REGEX REPLACE ".*\\([ \t\n]*" "" _suite "${_m}")
    list(APPEND _suites ${_suite})
  endforeach()
  list(REMOVE_DUPLICATES _suites)
  if(NOT _suites)
    message(FATAL_ERROR "${source}: no GoogleTest suite (TEST, TEST_F, TEST_P, TYPED_TEST) found")
  endif()
  set(_patterns)
  foreach(_suite IN LISTS _suites)
    get_property(_owner GLOBAL PROPERTY ACCELERATE_TEST_SUITE_${_suite})
    if(_owner AND NOT _owner STREQUAL source)
      message(FATAL_ERROR "Test suite '${_suite}' is defined in both ${_owner} and ${source}; "
                          "rename one: the bundled tests select their suites by name")
    endif()
    set_property(GLOBAL PROPERTY ACCELERATE_TEST_SUITE_${_suite} "${source}")
    # Plain, typed (Suite/0.Name) and parameterised (Prefix/Suite.Name/0) tests.
    list(APPEND _patterns "${_suite}.*" "${_suite}/*" "*/${_suite}.*")
  endforeach()
  list(JOIN _patterns ":" _filter)
  set(${out_var} "--gtest_filter=${_filter}" PARENT_SCOPE)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${source}")
endfunction()

# What every test executable, bundled or not, links and sees.
function(_accelerate_test_target_setup target)
  target_link_libraries(${target} PRIVATE AccelerateHPC::accelerate GTest::gtest)
  accelerate_use_test_pch(${target})
  # Tests may exercise private helpers (checking macros, wait logic).
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
endfunction()

# Sets <target_var> to the executable that holds test <name> and <args_var> to
# the arguments that select its tests there.
function(_accelerate_test_executable target_var args_var name own_main standalone)
  set(_sources ${ARGN})
  if(own_main OR standalone OR NOT ACCELERATE_TEST_BUNDLE)
    add_executable(${name} ${_sources})
    _accelerate_test_target_setup(${name})
    if(NOT own_main)
      target_link_libraries(${name} PRIVATE accelerate_mpi_test_main)
    endif()
    target_compile_definitions(${name} PRIVATE ACCELERATE_TEST_FILE_ID=accelerate_test_file)
    set(${target_var} ${name} PARENT_SCOPE)
    set(${args_var} "" PARENT_SCOPE)
    return()
  endif()

  list(LENGTH _sources _count)
  if(NOT _count EQUAL 1)
    message(FATAL_ERROR "test ${name}: a bundled test has one source file (mark it STANDALONE)")
  endif()
  set(_bundle ${ACCELERATE_TEST_BUNDLE_TARGET})
  if(NOT TARGET ${_bundle})
    add_executable(${_bundle})
    # Each bundled file wraps its code in namespace ACCELERATE_TEST_FILE_ID,
    # unique per file here, so helpers of the same name in two files do not clash.
    set_target_properties(${_bundle} PROPERTIES
      RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests
      UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ACCELERATE_TEST_UNITY_BATCH}
      UNITY_BUILD_UNIQUE_ID ACCELERATE_TEST_FILE_ID)
    _accelerate_test_target_setup(${_bundle})
    target_link_libraries(${_bundle} PRIVATE accelerate_mpi_test_main)
  endif()
  get_filename_component(_source "${_sources}" ABSOLUTE)
  # A file registered twice (once as a unit test, once under mpiexec) is
  # compiled once; its filter is worked out once.
  get_property(_filter GLOBAL PROPERTY ACCELERATE_TEST_BUNDLED_${_source})
  if(NOT _filter)
    target_sources(${_bundle} PRIVATE ${_source})
    _accelerate_test_filter(_filter "${_source}")
    set_property(GLOBAL PROPERTY ACCELERATE_TEST_BUNDLED_${_source} "${_filter}")
  endif()
  set(${target_var} ${_bundle} PARENT_SCOPE)
  set(${args_var} "${_filter}" PARENT_SCOPE)
endfunction()

# LINK and DEFINES of a test apply to the executable that holds it.
function(_accelerate_test_settings target link defines)
  if(link)
    target_link_libraries(${target} PRIVATE ${link})
  endif()
  if(defines)
    target_compile_definitions(${target} PRIVATE ${defines})
  endif()
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
  cmake_parse_arguments(T "OWN_MAIN;STANDALONE" "TIMEOUT" "SOURCES;LABELS;LINK;DEFINES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${ACCELERATE_TEST_TIMEOUT})
  endif()
  _accelerate_test_executable(_target _args ${name} "${T_OWN_MAIN}" "${T_STANDALONE}" ${T_SOURCES})
  _accelerate_test_settings(${_target} "${T_LINK}" "${T_DEFINES}")
  add_test(NAME ${name} COMMAND $<TARGET_FILE:${_target}> ${_args})
  _accelerate_test_properties(${name} 1 ${T_TIMEOUT} "unit;${T_LABELS}")
endfunction()

function(accelerate_add_mpi_test name)
  cmake_parse_arguments(T "OWN_MAIN;STANDALONE" "TIMEOUT" "SOURCES;NPROCS;LABELS;LINK;DEFINES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${ACCELERATE_TEST_TIMEOUT})
  endif()
  if(NOT T_NPROCS)
    set(T_NPROCS 1 2 4)
  endif()
  _accelerate_test_executable(_target _args ${name} "${T_OWN_MAIN}" "${T_STANDALONE}" ${T_SOURCES})
  _accelerate_test_settings(${_target} "${T_LINK}" "${T_DEFINES}")
  foreach(n IN LISTS T_NPROCS)
    set(test ${name}_np${n})
    add_test(NAME ${test}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${MPIEXEC_PREFLAGS}
              $<TARGET_FILE:${_target}> ${_args} ${MPIEXEC_POSTFLAGS})
    _accelerate_test_properties(${test} ${n} ${T_TIMEOUT} "mpi;${T_LABELS}")
  endforeach()
endfunction()

# The label `gpu` marks the tests that exercise CUDA, NCCL or a CUDA device
# when one is visible (and skip those parts without one);
# tests/gpu/run.sh runs `ctest -L gpu` on a machine with a GPU.
