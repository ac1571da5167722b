# Spack recipe for Accelerate-HPC.
#
# Each variant below switches one optional feature of the CMake build
# (ACCELERATE_WITH_<NAME> in CMakeLists.txt). tests/integration/spack_variants.py
# checks that the two lists agree.

import glob
import os

from spack.package import *

try:  # Spack >= 1.0: build systems live in the builtin package repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
except ImportError:  # Spack 0.x exports them from spack.package
    pass


class AccelerateHpc(CMakePackage):
    """MPI-native distributed training for LibTorch C++ programs: one
    Accelerator object, NCCL for CUDA tensors, parallel HDF5 checkpoints,
    hwloc NUMA affinity and Kokkos interoperability."""

    # No public tarball yet: build from a checkout with `spack develop`
    # (spack/environments/cluster/spack.yaml does so).
    version("main")
    version("0.1.0")

    variant("cuda", default=False, description="CUDA runtime: GPU device selection and streams")
    variant("nccl", default=False, description="NCCL collectives for CUDA tensors")
    variant("hdf5", default=True, description="Parallel HDF5 checkpoints")
    variant("kokkos", default=False, description="Kokkos view interoperability")
    variant("hwloc", default=True, description="hwloc NUMA affinity")
    variant("isal", default=True, description="ISA-L CRC-32C for checkpoint checksums")
    variant("tensorboard", default=True, description="TensorBoard event files (protobuf)")

    conflicts("+nccl", when="~cuda", msg="NCCL collectives need the CUDA runtime (+cuda)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.22:", type="build")

    depends_on("mpi")
    depends_on("nlohmann-json@3.10:", type="build")
    depends_on("cli11@2.1:", type="build")
    depends_on("yaml-cpp@0.6:")
    # Format strings (accelerate/format.hpp), header-only; unused where the
    # compiler's library has std::format, but cheap to have.
    depends_on("fmt@8:")
    # LibTorch comes with PyTorch: its CMake package sits in site-packages.
    depends_on("py-torch~cuda", when="~cuda")
    depends_on("py-torch+cuda", when="+cuda")
    depends_on("cuda", when="+cuda")
    depends_on("nccl", when="+nccl")
    depends_on("hdf5@1.10:+mpi", when="+hdf5")
    depends_on("kokkos@3.4:", when="+kokkos")
    depends_on("hwloc@2:", when="+hwloc")
    depends_on("isa-l", when="+isal")
    # protoc at build time, libprotobuf-lite at run time.
    depends_on("protobuf@3.12:", when="+tensorboard")

    depends_on("googletest@1.10:", type="test")

    # The smoke test builds the program under test/ against the installed package.
    test_requires_compiler = True

    def torch_dir(self):
        """Directory holding TorchConfig.cmake: site-packages/torch/share/cmake/Torch
        for a Spack-built py-torch, wherever it is for an external LibTorch.

        Known locations are tried first, then a few fixed-depth patterns
        (e.g. Debian's <prefix>/lib/<triplet>/cmake/Torch). Nothing walks the
        prefix recursively: an external prefix such as /usr holds symbolic-link
        cycles (/usr/lib/llvm-*/build) that make a recursive glob endless."""
        torch = self.spec["py-torch"]
        candidates = []
        try:
            candidates += [join_path(p, "Torch") for p in torch.package.cmake_prefix_paths]
        except Exception:  # external py-torch without a usable python dependency
            pass
        if "python" in self.spec:
            candidates.append(
                join_path(
                    torch.prefix.lib,
                    "python{0}".format(self.spec["python"].version.up_to(2)),
                    "site-packages", "torch", "share", "cmake", "Torch",
                )
            )
        candidates.append(join_path(torch.prefix, "share", "cmake", "Torch"))
        for path in candidates:
            if os.path.isfile(join_path(path, "TorchConfig.cmake")):
                return path
        patterns = [
            join_path(torch.prefix, "lib*", "cmake", "Torch"),
            join_path(torch.prefix, "lib*", "*", "cmake", "Torch"),
            join_path(torch.prefix, "lib*", "python3*", "*-packages", "torch", "share", "cmake", "Torch"),
            join_path(torch.prefix, "local", "lib*", "python3*", "*-packages", "torch", "share", "cmake", "Torch"),
        ]
        for pattern in patterns:
            for path in sorted(glob.glob(pattern)):  # fixed depth: "*" never crosses a "/"
                candidates.append(path)
                if os.path.isfile(join_path(path, "TorchConfig.cmake")):
                    return path
        raise InstallError(
            "TorchConfig.cmake not found under {0}; looked in: {1} and the patterns {2}".format(
                torch.prefix, ", ".join(candidates), ", ".join(patterns)
            )
        )

    def cmake_args(self):
        args = [
            self.define("Torch_DIR", self.torch_dir()),
            self.define("ACCELERATE_BUILD_TESTS", self.run_tests),
            self.define("ACCELERATE_BUILD_BENCH", False),
            self.define("ACCELERATE_BUILD_JOBS", False),
            self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", self.spec["mpi"].mpicxx),
            self.define_from_variant("ACCELERATE_WITH_CUDA", "cuda"),
            self.define_from_variant("ACCELERATE_WITH_NCCL", "nccl"),
            self.define_from_variant("ACCELERATE_WITH_HDF5", "hdf5"),
            self.define_from_variant("ACCELERATE_WITH_KOKKOS", "kokkos"),
            self.define_from_variant("ACCELERATE_WITH_HWLOC", "hwloc"),
            self.define_from_variant("ACCELERATE_WITH_ISAL", "isal"),
            self.define_from_variant("ACCELERATE_WITH_TENSORBOARD", "tensorboard"),
        ]
        if self.spec.satisfies("+cuda"):
            args.append(self.define("CUDAToolkit_ROOT", self.spec["cuda"].prefix))
        if self.spec.satisfies("+nccl"):
            args.append(self.define("NCCL_ROOT", self.spec["nccl"].prefix))
        if self.spec.satisfies("+kokkos"):
            args.append(self.define("Kokkos_ROOT", self.spec["kokkos"].prefix))
        if self.spec.satisfies("+hdf5"):
            # Through h5pcc, so FindHDF5 takes this HDF5's MPI, not another one's.
            args.append(self.define("HDF5_C_COMPILER_EXECUTABLE", self.spec["hdf5"].prefix.bin.h5pcc))
        if self.run_tests:
            args.append(self.define("MPIEXEC_EXECUTABLE", self.mpiexec()))
            args.append(self.define("MPIEXEC_PREFLAGS", self.mpiexec_preflags()))
        return args

    def mpiexec(self):
        for name in ("mpiexec", "mpirun"):
            path = join_path(self.spec["mpi"].prefix.bin, name)
            if os.path.exists(path):
                return path
        raise InstallError("no mpiexec or mpirun in {0}".format(self.spec["mpi"].prefix.bin))

    def mpiexec_preflags(self):
        # Spack's build environment drops OMPI_ALLOW_RUN_AS_ROOT (it unsets
        # *_ROOT variables): Open MPI run as root needs the flags instead.
        if self.spec["mpi"].name == "openmpi" and os.geteuid() == 0:
            return ["--allow-run-as-root", "--oversubscribe"]
        if self.spec["mpi"].name == "openmpi":
            return ["--oversubscribe"]
        return []

    def test_env_two_ranks(self):
        """accelerate-hpc env on 2 ranks reports a 2-process layout"""
        mpiexec = Executable(self.mpiexec())
        out = mpiexec(*self.mpiexec_preflags(), "-n", "2", join_path(self.prefix.bin, "accelerate-hpc"), "env",
                      output=str, error=str)
        assert "2 process(es)" in out, out

    def test_find_package_two_ranks(self):
        """a program built with find_package(AccelerateHPC) all-reduces on 2 ranks"""
        source = self.test_suite.current_test_data_dir
        if "cmake" in self.spec:
            cmake = Executable(self.spec["cmake"].prefix.bin.cmake)
        else:
            cmake = which("cmake", required=True)
        with working_dir("smoke-build", create=True):
            cmake(source, "-DCMAKE_PREFIX_PATH={0};{1}".format(self.prefix, self.torch_dir()),
                  "-DMPI_CXX_COMPILER={0}".format(self.spec["mpi"].mpicxx),
                  "-DMPI_C_COMPILER={0}".format(self.spec["mpi"].mpicc))
            cmake("--build", ".")
            mpiexec = Executable(self.mpiexec())
            out = mpiexec(*self.mpiexec_preflags(), "-n", "2", "./smoke", "2", output=str, error=str)
            for rank in (0, 1):
                assert "smoke: rank {0}/2 sum 3 ok".format(rank) in out, out
