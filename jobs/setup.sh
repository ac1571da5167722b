#!/usr/bin/env bash
# Installs what Accelerate-HPC needs to build and run on Debian 12.
#
# usage: jobs/setup.sh [--mpi=openmpi|mpich] [--with-slurm]
#
# As root, missing packages are installed with apt-get; otherwise the exact
# command is printed and the script fails. Installed packages are left alone,
# so a second run costs a few dpkg queries.
set -euo pipefail

mpi=openmpi
with_slurm=0
for arg in "$@"; do
  case "$arg" in
    --mpi=openmpi|--mpi=mpich) mpi=${arg#--mpi=} ;;
    --with-slurm) with_slurm=1 ;;
    *) echo "setup.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

packages=(cmake g++ make libgtest-dev libtorch-dev libtrilinos-kokkos-dev libnuma-dev libhwloc-dev libisal-dev libprotobuf-dev protobuf-compiler nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libfmt-dev hdf5-tools
          libopenblas0-pthread libgloo-dev doxygen clang-format clang-tidy
          python3-venv  # venvs of the PyPI readers the tests use (TensorBoard) and of LibTorch 2.x
          g++-aarch64-linux-gnu qemu-user  # the aarch64 CRC-32C kernels, built and run under emulation
          python3-torch)  # Debian's torch.load reads our files; Accelerate's big-model functions run on it
# Open MPI is always present: Debian's LibTorch and HDF5 tools pull it in.
packages+=(libopenmpi-dev openmpi-bin libhdf5-openmpi-dev)
if [ "$mpi" = mpich ]; then
  packages+=(libmpich-dev mpich libhdf5-mpich-dev)
fi
if [ "$with_slurm" = 1 ]; then
  packages+=(slurmctld slurmd slurm-client munge libpmix-dev)
fi

missing=()
for p in "${packages[@]}"; do
  grep -q '^install ok installed$' <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

install=(apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: missing packages: ${missing[*]}" >&2
  echo "setup.sh: install them as root with:  ${install[*]}" >&2
  exit 1
fi
echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! "${install[@]}" >&2; then
  # A fresh machine may have stale package lists.
  apt-get -o DPkg::Lock::Timeout=900 update >&2
  "${install[@]}" >&2
fi
