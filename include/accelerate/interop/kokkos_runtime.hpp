// KokkosRuntime: Kokkos' lifetime, ordered against MPI (held by State).
//
//   int main(int argc, char** argv) {
//     accelerate::State state;                    // 1. MPI (and device choice)
//     accelerate::kokkos::KokkosRuntime kokkos(state, {.num_threads = 4});  // 2. Kokkos
//     { ... views, tensors, collectives ... }     // 3. release views and tensors
//   }                                             // 4. ~KokkosRuntime: Kokkos::finalize
//                                                 // 5. ~State: MPI_Finalize
//
// Declared after the State, the runtime is destroyed before it, so Kokkos is
// initialised after MPI and finalised before MPI, the order Kokkos and CUDA-
// aware MPIs expect. If the program initialised Kokkos itself, the runtime
// adopts it and never finalises it (Kokkos::ScopeGuard's rule). Kokkos can be
// initialised once per process only: an owning runtime that has finalised
// Kokkos cannot be followed by another one.
//
// Threads and devices (details in docs/kokkos.md, "Lifecycle"):
//   - CUDA device: the State's (cuda:<local choice>) unless options.device_id
//     says otherwise; tensors from CUDA views are placed on Kokkos' device.
//   - host threads of Kokkos' OpenMP/Threads backend: options.num_threads if
//     set, else Kokkos' own rules (--kokkos-* flags with the argv constructor,
//     KOKKOS_NUM_THREADS, OMP_NUM_THREADS, then every CPU of the process's
//     affinity mask). Create the runtime after NUMA binding so Kokkos' threads
//     inherit the rank's CPU set. LibTorch's intra-op pool is separate and set
//     with at::set_num_threads; give both the same count.
#pragma once

#include "accelerate/interop/kokkos_tensor.hpp"

#include <mpi.h>

#include <cstdio>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate::kokkos {

struct KokkosRuntimeOptions {
  /// Host threads of Kokkos' OpenMP/Threads backend; 0 leaves it to Kokkos.
  int num_threads = 0;
  /// CUDA device Kokkos runs on; -1 takes the State's device (or, on a CPU
  /// State, Kokkos' default).
  int device_id = -1;
};

namespace detail {

/// Set once an owning KokkosRuntime has finalised Kokkos in this process.
inline bool& finalized_by_runtime() noexcept {
  static bool finalized = false;
  return finalized;
}

inline int device_index_of(const State& state) { return state.device().index(); }

[[noreturn]] inline void runtime_error(const std::string& what, const std::string& remedy) {
  throw ConfigError("KokkosRuntime: " + what + ". " + remedy);
}

}  // namespace detail

class [[nodiscard]] KokkosRuntime {
 public:
  /// Initialises Kokkos with `options`, or adopts an initialised Kokkos
  /// (options are then not applied). ConfigError when Kokkos was already
  /// finalised in this process, or when an adopted CUDA Kokkos runs on
  /// another device than the State.
  explicit KokkosRuntime(const State& state, KokkosRuntimeOptions options = {}) {
    if (adopt(state)) return;
    const int device = options.device_id >= 0 ? options.device_id : detail::device_index_of(state);
#if KOKKOS_VERSION >= 30700
    Kokkos::InitializationSettings settings;
    if (options.num_threads > 0) settings.set_num_threads(options.num_threads);
    if (device >= 0) settings.set_device_id(device);
    Kokkos::initialize(settings);
#else
    Kokkos::InitArguments arguments;
    if (options.num_threads > 0) arguments.num_threads = options.num_threads;
    if (device >= 0) arguments.device_id = device;
    Kokkos::initialize(arguments);
#endif
    owns_ = true;
  }

  /// Initialises Kokkos from the command line (Kokkos' --kokkos-* flags,
  /// removed from argv), or adopts an initialised Kokkos.
  KokkosRuntime(const State& state, int& argc, char** argv) {
    if (adopt(state)) return;
    Kokkos::initialize(argc, argv);
    try {
      check_device(state);
    } catch (...) {
      Kokkos::finalize();
      detail::finalized_by_runtime() = true;
      throw;
    }
    owns_ = true;
  }

  /// Finalises Kokkos if this runtime initialised it. Every view (and every
  /// tensor made from one) must be gone by then; the ones still alive are
  /// reported. Must run before MPI_Finalize (before ~State).
  ~KokkosRuntime() {
    if (!owns_ || !Kokkos::is_initialized()) return;
    const auto live = detail::live_shared_tensors().load();
    if (live > 0) {
      std::fprintf(stderr,
                   "%s KokkosRuntime: finalising Kokkos while %lld tensor(s) made by to_tensor still share view "
                   "memory; release them before the runtime ends (freeing them afterwards is an error in Kokkos)\n",
                   accelerate::detail::where().c_str(), static_cast<long long>(live));
    }
    int mpi_finalized = 0;
    MPI_Finalized(&mpi_finalized);
    if (mpi_finalized) {
      std::fprintf(stderr,
                   "%s KokkosRuntime: MPI was finalised before Kokkos; declare the KokkosRuntime after the State "
                   "so that it is destroyed first\n",
                   accelerate::detail::where().c_str());
    }
    Kokkos::finalize();
    detail::finalized_by_runtime() = true;
  }

  KokkosRuntime(const KokkosRuntime&) = delete;
  KokkosRuntime& operator=(const KokkosRuntime&) = delete;
  KokkosRuntime(KokkosRuntime&&) = delete;
  KokkosRuntime& operator=(KokkosRuntime&&) = delete;

  /// True when this runtime initialised Kokkos (and will finalise it).
  [[nodiscard]] bool owns_kokkos() const noexcept { return owns_; }

 private:
  /// True when Kokkos is already running (adopted); throws when it cannot run again.
  bool adopt(const State& state) {
    bool finalized = detail::finalized_by_runtime();
#if KOKKOS_VERSION >= 30700
    finalized = finalized || Kokkos::is_finalized();
#endif
    if (!Kokkos::is_initialized() && finalized) {
      detail::runtime_error(
          "Kokkos was already initialised and finalised in this process, and Kokkos cannot be "
          "initialised twice",
          "Create one KokkosRuntime for the whole program, right after the State");
    }
    if (!Kokkos::is_initialized()) return false;
    check_device(state);
    return true;
  }

  static void check_device(const State& state) {
#if defined(KOKKOS_ENABLE_CUDA)
    const int wanted = detail::device_index_of(state);
    const int running = static_cast<int>(detail::kokkos_device_index());
    if (wanted >= 0 && running != wanted) {
      detail::runtime_error("Kokkos runs on cuda:" + std::to_string(running) + " but the State chose " +
                                state.device().str() + " for this rank",
                            "Let KokkosRuntime initialise Kokkos, or pass --kokkos-device-id=" +
                                std::to_string(wanted) + " (the State's device) when initialising it yourself");
    }
#else
    (void)state;
#endif
  }

  bool owns_ = false;
};

}  // namespace accelerate::kokkos
