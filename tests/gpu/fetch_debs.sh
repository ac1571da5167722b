#!/usr/bin/env bash
# Downloads, on a Debian 12 machine with network, the .deb files a GPU machine
# without network needs to build and run the MPI and parallel-HDF5 parts of
# Accelerate-HPC: Open MPI 4.1, parallel HDF5 1.10, hwloc and GoogleTest,
# with the runtime libraries they load that a CUDA image is unlikely to have.
# tests/gpu/run.sh unpacks them there (dpkg -x, never into /).
#
# usage: tests/gpu/fetch_debs.sh [--dest=DIR] [--dry-run]
#   --dest=DIR   where the .deb files go (default .gpu-kit/debs at the repository
#                root, git-ignored; carry ".gpu-kit" to the GPU machine)
#   --dry-run    print the resolved package list and stop
#
# The dependency closure follows Depends and Pre-Depends (no Recommends), takes
# the first alternative of an "a | b" choice, does not descend into -dev
# packages other than the roots (only their runtime libraries matter), and
# stops at the packages listed in `assumed_present` below. The folder must stay
# well under the 64 MiB a device call may carry; the script fails above 48 MiB.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dest=$root/.gpu-kit/debs
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --dest=*) dest=${arg#--dest=} ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "fetch_debs.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

readonly limit_mib=48

# What the project needs (CMakeLists.txt: MPI C/CXX required; tests/: GTest
# required; HDF5 parallel and hwloc optional but wanted; Kokkos left out).
roots=(
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev     # MPI, mpirun, wrapper compilers
  libhdf5-openmpi-dev libhdf5-openmpi-103-1                  # parallel HDF5 (h5pcc, headers, libhdf5.so)
  libhdf5-openmpi-hl-100                                     # libhdf5_hl: h5pcc -show -shlib names it
  libhwloc-dev libhwloc15                                    # ACCELERATE_WITH_HWLOC
  libgtest-dev                                               # GTest::gtest for the test executables
  nlohmann-json3-dev libcli11-dev                            # header-only: JSON, the CLI's command line
  libisal-dev libisal2                                       # ACCELERATE_WITH_ISAL: the checkpoints' CRC-32C
  libyaml-cpp-dev libyaml-cpp0.7                             # the configuration file's YAML
  libfmt-dev                                                 # format strings (header-only) where there is no std::format
  libprotobuf-dev libprotobuf-lite32 protobuf-compiler       # ACCELERATE_WITH_TENSORBOARD: the event files
)

# Packages a CUDA image (Ubuntu- or Debian-based, with apt, Python and a C++
# compiler) already has, or that nothing here needs. The closure stops there.
assumed_present=(
  # C and C++ runtime and toolchain
  libc6 libc6-dev libc-dev-bin libgcc-s1 gcc-12-base libstdc++6 libstdc++-12-dev
  gcc g++ cpp gcc-12 g++-12 cpp-12 binutils libatomic1 libgomp1 libquadmath0
  # compression, crypto and TLS that apt itself links (present on every image with apt)
  zlib1g libzstd1 liblzma5 libbz2-1.0 libssl3 libcrypt1
  libgnutls30 libgmp10 libnettle8 libhogweed6 libp11-kit0 libtasn1-6 libunistring2 libidn2-0 libffi8
  # base system and packaging
  debconf dpkg tar perl-base perl adduser passwd debianutils install-info
  libselinux1 libpcre2-8-0 libudev1 libuuid1 libtinfo6 libacl1 libattr1 libmd0 libbsd0
  libpam0g libpam-modules libpam-modules-bin libaudit1 libaudit-common libcap-ng0 libcap2
  libsemanage2 libsemanage-common libsepol2 libdb5.3 libsystemd0
  # not needed: ssh (one node), Fortran (the C/C++ bindings only), hwloc's
  # optional plugins (dlopened; they pull X11, OpenCL and NVCtrl), the C++ and
  # Fortran HDF5 APIs (libhdf5-openmpi-dev names them; the project uses the C
  # API), and the JavaScript of Open MPI's HTML documentation
  openssh-client gfortran gfortran-12 libgfortran5 libhwloc-plugins
  libhdf5-openmpi-cpp-103-1 libhdf5-openmpi-hl-cpp-100
  libhdf5-openmpi-fortran-102 libhdf5-openmpi-hl-fortran-100
  libjs-jquery libjs-jquery-ui
)

is_assumed() {
  local p
  for p in "${assumed_present[@]}"; do [ "$p" = "$1" ] && return 0; done
  return 1
}
is_root() {
  local p
  for p in "${roots[@]}"; do [ "$p" = "$1" ] && return 0; done
  return 1
}

if ! command -v apt-cache >/dev/null || ! command -v apt-get >/dev/null; then
  echo "fetch_debs.sh: needs apt-get and apt-cache (a Debian 12 machine)" >&2
  exit 1
fi
if ! grep -q '^VERSION_ID="12"' /etc/os-release 2>/dev/null || ! grep -q '^ID=debian' /etc/os-release; then
  echo "fetch_debs.sh: warning: this is not Debian 12; the kit is meant to hold bookworm packages" >&2
fi
[ "$(dpkg --print-architecture)" = amd64 ] || { echo "fetch_debs.sh: the GPU machine is x86-64; run this on amd64" >&2; exit 1; }
if ! apt-cache show libopenmpi3 >/dev/null 2>&1; then
  echo "fetch_debs.sh: apt knows no libopenmpi3; run apt-get update first" >&2
  exit 1
fi

# One level of dependencies of $1, one chosen package per line: for an
# "a | b | <virtual>" group the first real alternative, or nothing when one of
# the alternatives is assumed present.
direct_deps() {
  apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "$1" 2>/dev/null |
    awk -v assumed_list="${assumed_present[*]}" '
      BEGIN { split(assumed_list, a, " "); for (i in a) assumed[a[i]] = 1 }
      function flush() { if (n > 0 && !skip && pick != "") print pick; n = 0; skip = 0; pick = "" }
      /^ *\|?(Pre)?Depends: / {
        if (!cont) flush()
        cont = ($1 ~ /^\|/)         # "|Depends:" means: or the next line
        name = $2
        n++
        if (name ~ /^</) { gsub(/[<>]/, "", name); virtual = 1 } else virtual = 0
        if (!virtual && pick == "") pick = name
        if (name in assumed) skip = 1
        next
      }
      /^    [^ ]/ && n > 0 {         # a provider of the virtual package above
        if (pick == "") pick = $1
        if ($1 in assumed) skip = 1
        next
      }
      END { flush() }
    ' | sort -u
}

declare -A seen=()
queue=("${roots[@]}")
packages=()
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}
  queue=("${queue[@]:1}")
  [ -n "${seen[$p]:-}" ] && continue
  seen[$p]=1
  is_assumed "$p" && continue
  packages+=("$p")
  # Headers of dependencies are not needed: a -dev package that is not a root
  # is left out together with what only it would pull in.
  while IFS= read -r d; do
    [ -z "$d" ] && continue
    [ -n "${seen[$d]:-}" ] && continue
    if [[ $d == *-dev ]] && ! is_root "$d"; then
      seen[$d]=1
      continue
    fi
    queue+=("$d")
  done < <(direct_deps "$p")
done

mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
echo "fetch_debs.sh: ${#packages[@]} packages:" >&2
printf '  %s\n' "${packages[@]}" >&2
[ "$dry_run" = 1 ] && exit 0

mkdir -p "$dest"
# A second run downloads only what is missing; stale versions are removed.
cd "$dest"
rm -f ./*.deb.partial
apt-get download "${packages[@]}" >&2
# Keep exactly one file per package (the newest download wins).
for p in "${packages[@]}"; do
  mapfile -t files < <(ls -t -- "${p}"_*.deb 2>/dev/null)
  [ ${#files[@]} -gt 0 ] || { echo "fetch_debs.sh: $p was not downloaded" >&2; exit 1; }
  [ ${#files[@]} -gt 1 ] && rm -f -- "${files[@]:1}"
done
for f in ./*.deb; do
  name=$(dpkg-deb -f "$f" Package)
  grep -qxF -- "$name" <<<"$(printf '%s\n' "${packages[@]}")" || { echo "fetch_debs.sh: removing $f (no longer needed)" >&2; rm -f -- "$f"; }
done

{
  echo "# Written by tests/gpu/fetch_debs.sh on $(date -u +%Y-%m-%d); package version bytes"
  for f in ./*.deb; do
    printf '%s %s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" "$(stat -c %s "$f")"
  done
} >MANIFEST

bytes=$(du -sb . | cut -f1)
mib=$(( (bytes + 1048575) / 1048576 ))
count=$(find . -maxdepth 1 -name '*.deb' | wc -l)
echo "fetch_debs.sh: $count .deb files, $bytes bytes (${mib} MiB) in $dest"
if [ "$mib" -gt "$limit_mib" ]; then
  echo "fetch_debs.sh: more than $limit_mib MiB; a device call carries at most 64 MiB with the working tree" >&2
  exit 1
fi
