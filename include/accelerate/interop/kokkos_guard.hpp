// Included first by every Kokkos interop header: stops the build with a
// clear message when this build of Accelerate-HPC has no Kokkos, then brings
// in Kokkos itself.
#pragma once

#include "accelerate/config.hpp"

#if !ACCELERATE_HAVE_KOKKOS
#error \
    "accelerate/interop/kokkos*.hpp needs Kokkos, and this build of Accelerate-HPC was configured without it. Reconfigure with -DACCELERATE_WITH_KOKKOS=ON (and Kokkos_ROOT pointing at a Kokkos installation), or 'spack install accelerate-hpc+kokkos'; test for it with ACCELERATE_HAVE_KOKKOS from <accelerate/config.hpp>."
#else
#include <Kokkos_Core.hpp>
#endif
