# kokkos tests at 1, 2 and 4 ranks (include()d from CMakeLists.txt here).
# Kokkos can be initialised once per process, so each lifecycle (owned by a
# KokkosRuntime, adopted from the program) has its own executable. Kokkos
# comes through accelerate_kokkos (src/interop/sources.cmake).
if(ACCELERATE_HAVE_KOKKOS)
  accelerate_add_mpi_test(kokkos_collectives_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kokkos_collectives_test.cpp
    NPROCS 1 2 4 LABELS kokkos TIMEOUT 120)
  accelerate_add_mpi_test(kokkos_runtime_owned_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kokkos_runtime_owned_test.cpp
    NPROCS 1 2 LABELS kokkos TIMEOUT 60)
  accelerate_add_mpi_test(kokkos_runtime_adopted_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kokkos_runtime_adopted_test.cpp
    NPROCS 1 2 LABELS kokkos TIMEOUT 60)
  foreach(_test IN ITEMS kokkos_collectives_test kokkos_runtime_owned_test kokkos_runtime_adopted_test)
    target_link_libraries(${_test} PRIVATE accelerate_kokkos)
  endforeach()
endif()
