# spack integration tests (include()d from CMakeLists.txt here).
# The Spack recipe's variants and the CMake feature switches must agree; the
# second test proves the comparison notices when they drift apart.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME spack_variants_agree
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/spack_variants.py ${PROJECT_SOURCE_DIR})
  add_test(NAME spack_variants_detect_drift
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/spack_variants.py ${PROJECT_SOURCE_DIR} --self-test)
  set_tests_properties(spack_variants_agree spack_variants_detect_drift PROPERTIES
    TIMEOUT 60 LABELS "integration;spack")
else()
  message(STATUS "spack_variants tests: no Python 3 interpreter found, not registered")
endif()

# The recipe installed for real, offline, against the system's packages as
# externals; skipped (exit 77) where no Spack 1.x, recipes or solver are given
# (ACCELERATE_SPACK, ACCELERATE_SPACK_PACKAGES, SPACK_PYTHON: docs/install.md).
add_test(NAME spack_install
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/spack_install_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(spack_install PROPERTIES
  TIMEOUT 2400 LABELS "integration;spack" SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
