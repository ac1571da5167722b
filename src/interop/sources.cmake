# Sources of the interop module (include()d from src/CMakeLists.txt).
#
# The Kokkos interop is header-only (include/accelerate/interop/kokkos*.hpp):
# libaccelerate does not link Kokkos. Programs in this build (tests, jobs)
# that use it link accelerate_kokkos, which adds Kokkos to the library.
if(ACCELERATE_HAVE_KOKKOS)
  add_library(accelerate_kokkos INTERFACE)
  add_library(AccelerateHPC::kokkos ALIAS accelerate_kokkos)
  # Kokkos::kokkos comes from cmake/FindKokkosDebian.cmake, which repairs
  # Debian's broken config.
  target_link_libraries(accelerate_kokkos INTERFACE accelerate Kokkos::kokkos)
endif()
