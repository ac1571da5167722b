# kokkos tests at 1, 2 and 4 ranks (include()d from CMakeLists.txt here).
# Kokkos can be initialised once per process, so each lifecycle (owned by a
# KokkosRuntime, adopted from the program) runs in a process of its own (each
# registered test runs only its file's suites). kokkos_collectives_test
# initialises Kokkos in a global test environment, which would reach every
# test of the bundle: it keeps its own executable. Kokkos comes through
# accelerate_kokkos (src/interop/sources.cmake).
if(ACCELERATE_HAVE_KOKKOS)
  accelerate_add_mpi_test(kokkos_collectives_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kokkos_collectives_test.cpp
    NPROCS 1 2 4 LABELS kokkos TIMEOUT 120 LINK accelerate_kokkos STANDALONE)
  accelerate_add_mpi_test(kokkos_runtime_owned_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kokkos_runtime_owned_test.cpp
    NPROCS 1 2 LABELS kokkos TIMEOUT 60 LINK accelerate_kokkos)
  accelerate_add_mpi_test(kokkos_runtime_adopted_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kokkos_runtime_adopted_test.cpp
    NPROCS 1 2 LABELS kokkos TIMEOUT 60 LINK accelerate_kokkos)
endif()
