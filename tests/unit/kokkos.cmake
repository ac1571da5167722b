# kokkos tests (include()d from CMakeLists.txt here). The interop headers are
# header-only: the tests link Kokkos through accelerate_kokkos (src/interop).
# The interop test initialises Kokkos in a global test environment, which
# would reach every test of the bundle: it keeps its own executable.
if(ACCELERATE_HAVE_KOKKOS)
  accelerate_add_unit_test(kokkos_interop_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kokkos_interop_test.cpp
    LABELS kokkos TIMEOUT 120 LINK accelerate_kokkos STANDALONE)
endif()

# In a build without Kokkos the interop headers stop compilation with a
# message naming the CMake switch (checked here against a config.hpp that
# says so; the compiler stops at the first error).
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/no_kokkos/accelerate/config.hpp "#pragma once\n#define ACCELERATE_HAVE_KOKKOS 0\n")
add_test(NAME kokkos_header_without_kokkos
  COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -Wfatal-errors -x c++
          -I${CMAKE_CURRENT_BINARY_DIR}/no_kokkos -I${PROJECT_SOURCE_DIR}/include
          ${PROJECT_SOURCE_DIR}/include/accelerate/interop/kokkos.hpp)
set_tests_properties(kokkos_header_without_kokkos PROPERTIES
  LABELS "unit;kokkos" TIMEOUT 60
  PASS_REGULAR_EXPRESSION "configured without it. Reconfigure with -DACCELERATE_WITH_KOKKOS=ON")
