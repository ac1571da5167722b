#!/usr/bin/env bash
# The GPU job: on a machine with an NVIDIA GPU, no network, a CUDA toolkit and
# a Python with the CUDA build of torch and the nvidia-nccl wheel, builds
# Accelerate-HPC with CUDA, NCCL, parallel HDF5 and hwloc, runs the tests that
# exercise CUDA (ctest label `gpu`) and the training job on cuda:0, and writes
# a report. MPI, HDF5, hwloc and GoogleTest come from the .deb files that
# tests/gpu/fetch_debs.sh downloaded beforehand (docs/gpu.md).
#
# usage: bash tests/gpu/run.sh [options]        (from the repository root)
#   --stage=S          unpack | configure | build | test | all | bench (default all).
#                      Each stage runs the ones before it that are not done yet;
#                      `test` needs the build of an earlier call on the SAME
#                      machine (the build folder survives only while it stays warm);
#                      `bench` runs the benchmarks (docs/gpu.md) on such a build
#   --with-bench       also build the benchmarks (bench_gpu_train, bench_collectives,
#                      bench_train), so that a later --stage=bench finds them
#   --prefix=DIR       where the .deb files are unpacked (default /opt/kit; never /)
#   --debs=DIR         the .deb files (default .gpu-kit/debs)
#   --build-dir=DIR    build folder (default build-gpu)
#   --jobs=N           build and test parallelism (default: number of cores)
#   --full             build every target, not only what the gpu tests and jobs need
#   --no-torch-shim    let LibTorch's CMake look for the CUDA toolkit itself
#   --ctest-args="..." extra ctest arguments (word-split), e.g. "-R nccl"
#
# Output: $OUT/gpu-report.md when $OUT is set, else <build-dir>/gpu-report.md,
# next to gpu-run.log (everything this script ran), gpu-ctest.log and
# gpu-LastTest.log (the output of every test). A missing prerequisite stops
# the script with one line naming it.

# The stage functions are called through step(); shellcheck cannot see that.
# shellcheck disable=SC2317,SC2094
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
stage=all
prefix=/opt/kit
debs=$root/.gpu-kit/debs
build=$root/build-gpu
jobs=$(nproc)
full=0
with_bench=0
torch_shim=1
ctest_extra=()
for arg in "$@"; do
  case "$arg" in
    --stage=unpack|--stage=configure|--stage=build|--stage=test|--stage=all|--stage=bench) stage=${arg#--stage=} ;;
    --with-bench) with_bench=1 ;;
    --prefix=*) prefix=${arg#--prefix=} ;;
    --debs=*) debs=${arg#--debs=} ;;
    --build-dir=*) build=${arg#--build-dir=} ;;
    --jobs=*) jobs=${arg#--jobs=} ;;
    --full) full=1 ;;
    --no-torch-shim) torch_shim=0 ;;
    --ctest-args=*) read -r -a ctest_extra <<<"${arg#--ctest-args=}" ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
case "$prefix" in
  /|/usr|/usr/*|'') echo "run.sh: --prefix=$prefix: unpack into a folder of its own, never the system" >&2; exit 2 ;;
esac
[ "$stage" = bench ] && with_bench=1
[[ $build = /* ]] || build=$root/$build
[[ $debs = /* ]] || debs=$root/$debs

out=${OUT:-$build}
mkdir -p "$build" "$out"
log=$out/gpu-run.log
timings=$build/gpu-timings.tsv
report=$out/gpu-report.md
touch "$timings"
echo "== run.sh --stage=$stage $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)" >>"$log"

die() { echo "run.sh: $*" | tee -a "$log" >&2; exit 1; }
note() { echo "run.sh: $*" | tee -a "$log" >&2; }

# step <name> <command...>: runs the command with its output in the log, and
# records how long it took (seconds) in gpu-timings.tsv.
step() {
  local name=$1 start end rc=0
  shift
  start=$(date +%s)
  note "step $name: $*"
  "$@" >>"$log" 2>&1 || rc=$?
  end=$(date +%s)
  printf '%s\t%s\t%s\t%s\n' "$name" "$((end - start))" "$rc" "$(date -u +%H:%M:%S)" >>"$timings"
  note "step $name: exit $rc after $((end - start)) s"
  return "$rc"
}

arch=x86_64-linux-gnu
kit=$prefix/usr
kitlib=$kit/lib/$arch

# ---------------------------------------------------------------- unpack
unpack() {
  [ -d "$debs" ] || die "no .deb folder at $debs: run tests/gpu/fetch_debs.sh where there is network, and carry .gpu-kit"
  compgen -G "$debs/*.deb" >/dev/null || die "no .deb files in $debs: run tests/gpu/fetch_debs.sh first"
  local want stamp=$prefix/.unpacked
  want=$(cd "$debs" && find . -maxdepth 1 -name '*.deb' | sort | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    note "unpack: $prefix is up to date"
    return 0
  fi
  # Start from an empty prefix, but delete only one this script made.
  if [ -e "$prefix" ] && [ -n "$(ls -A "$prefix" 2>/dev/null)" ] && [ ! -f "$prefix/env.sh" ]; then
    die "$prefix exists, is not empty and was not made by this script; choose another --prefix"
  fi
  rm -rf "$prefix"
  mkdir -p "$prefix/bin" "$prefix/shadowed"
  local f
  for f in "$debs"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$f" "$prefix"
    else  # not a Debian-like image: a .deb is an ar archive holding data.tar.*
      (cd "$prefix" && ar p "$f" "$(ar t "$f" | grep '^data\.tar')" | tar -x --auto-compress -f - 2>/dev/null) ||
        (cd "$prefix" && ar p "$f" data.tar.xz | tar -xJf -)
    fi
  done
  # Absolute links inside the packages would point into the system: point them into the prefix.
  local link target
  while IFS= read -r link; do
    target=$(readlink "$link")
    if [ -e "$prefix$target" ]; then ln -sfn "$prefix$target" "$link"; fi
  done < <(find "$prefix" -type l -lname '/*')
  # Debian makes mpicc, mpirun, h5pcc through update-alternatives, which dpkg -x does not run.
  local tool
  for tool in mpicc mpicxx mpic++ mpiCC mpirun mpiexec; do
    ln -sfn "$kit/bin/$tool.openmpi" "$prefix/bin/$tool"
  done
  ln -sfn "$kit/bin/ompi_info" "$prefix/bin/ompi_info"
  # h5pcc names its install prefix in plain text. It links the static
  # libhdf5.a unless told otherwise (FindHDF5 compiles its probe without
  # -shlib), which would need libcurl, libcrypto, libsz and libz development
  # links the image may lack: this copy links the shared libhdf5, which
  # carries its own dependencies, so the extra -l flags go.
  sed -e "s|^prefix=\"/usr\"|prefix=\"$kit\"|" \
      -e 's|^CCBASE=.*|CCBASE="mpicc"|' -e 's|^CLINKERBASE=.*|CLINKERBASE="mpicc"|' \
      -e 's|^STATIC_AVAILABLE=.*|STATIC_AVAILABLE="no"|' \
      -e 's|^H5BLD_LIBS=.*|H5BLD_LIBS=""|' \
      "$kit/bin/h5pcc.openmpi" >"$prefix/bin/h5pcc"
  chmod +x "$prefix/bin/h5pcc"
  grep -q "^prefix=\"$kit\"" "$prefix/bin/h5pcc" || die "could not relocate h5pcc (its prefix line changed?)"
  # A general-purpose library the image already has (libcurl, Kerberos, ...)
  # is taken from the image: the kit's older copy is moved aside so that
  # LD_LIBRARY_PATH does not put it in front of newer libraries that need
  # the image's. The MPI/HDF5 stack itself always comes from the kit.
  local so name system_libs
  command -v ldconfig >/dev/null || { write_env; echo "$want" >"$stamp"; return 0; }
  system_libs=$(ldconfig -p)  # read once: grep -q on a pipe would SIGPIPE it under pipefail
  while IFS= read -r so; do
    name=$(basename "$so")
    [[ $name =~ ^lib(mpi|open-pal|open-rte|mca_common|ompitrace|oshmem|hdf5|pmix|hwloc|event|gtest|gmock|sz|aec) ]] && continue
    if grep -q "^[[:space:]]*$name " <<<"$system_libs"; then
      mv "$so" "$prefix/shadowed/"
      echo "unpack: the image has $name; using the image's" >>"$log"
    fi
  done < <(find "$kitlib" -maxdepth 1 -name 'lib*.so.[0-9]*' -type l | grep -E '\.so\.[0-9]+$')
  write_env
  echo "$want" >"$stamp"
  note "unpack: $(find "$debs" -maxdepth 1 -name '*.deb' | wc -l) packages into $prefix ($(du -sh "$prefix" | cut -f1))"
}

# The environment every later stage (and a person at the shell) uses.
write_env() {
  cat >"$prefix/env.sh" <<EOF
# Written by tests/gpu/run.sh: the unpacked Open MPI, PMIx, HDF5 and hwloc.
# Open MPI and PMIx were built for /usr; these variables relocate them.
export OPAL_PREFIX=$kit
export OPAL_SYSCONFDIR=$prefix/etc/openmpi
# PMIx names its libdir and datadir as absolute paths: they need their own variables.
export PMIX_PREFIX=$kitlib/pmix2 PMIX_LIBDIR=$kitlib/pmix2/lib PMIX_DATADIR=$kitlib/pmix2/share
export PATH=$prefix/bin:$kit/bin:\$PATH
export LD_LIBRARY_PATH=$kitlib/openmpi/lib:$kitlib:$kitlib/pmix2/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
# As root, ranks beyond the cores, one node: shared memory and TCP only (no
# UCX, libfabric or verbs), and no cross-memory attach, which containers forbid.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_vader_single_copy_mechanism=none
EOF
}

# ---------------------------------------------------------------- prerequisites
python=${PYTHON:-python3}
find_tools() {
  command -v "$python" >/dev/null || die "no python3 on PATH (set PYTHON=/path/to/python with torch)"
  torch_cmake=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>>"$log") ||
    die "python3 ($python) cannot import torch"
  torch_dir=$(dirname "$(dirname "$torch_cmake")")
  [ -f "$torch_cmake/Torch/TorchConfig.cmake" ] || die "no TorchConfig.cmake under $torch_cmake"
  [ -f "$torch_dir/lib/libtorch_cuda.so" ] || die "the torch at $torch_dir is not a CUDA build (no lib/libtorch_cuda.so)"
  site=$(dirname "$torch_dir")
  nccl_h=$(find "$site/nvidia" -name nccl.h -path '*/include/*' 2>/dev/null | head -n1)
  [ -n "$nccl_h" ] || die "no nccl.h under $site/nvidia (pip package nvidia-nccl-cu13)"
  nccl_lib=$(find "$(dirname "$(dirname "$nccl_h")")" -name 'libnccl.so*' 2>/dev/null | sort | head -n1)
  [ -n "$nccl_lib" ] || die "no libnccl.so* next to $nccl_h"
  # One CUDA runtime in the process: the one torch was built and tested with.
  cudart_lib=$(find "$site/nvidia" -name 'libcudart.so.[0-9]*' 2>/dev/null | sort | head -n1)
  nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; } ||
    die "no nvcc on PATH nor in /usr/local/cuda/bin (the CUDA toolkit)"
  cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  command -v g++ >/dev/null || die "no g++ on PATH"
  command -v cmake >/dev/null || die "no cmake on PATH"
  generator=Ninja
  command -v ninja >/dev/null || { generator="Unix Makefiles"; note "no ninja on PATH; using make"; }
  command -v nvidia-smi >/dev/null || note "no nvidia-smi on PATH"
}

# ---------------------------------------------------------------- configure
configure() {
  local args=(
    -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo
    # Line tables only: backtraces and cuda-gdb still name lines, and the
    # compilations take about a third less time than with full -g.
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
    "-DCMAKE_PREFIX_PATH=$torch_dir;$kit"
    "-DTorch_DIR=$torch_cmake/Torch" "-DCaffe2_DIR=$torch_cmake/Caffe2"
    "-DTORCH_LIBRARY=$torch_dir/lib/libtorch.so" "-Dc10_LIBRARY=$torch_dir/lib/libc10.so"
    -DACCELERATE_TORCH_CPU_ONLY=OFF
    -DACCELERATE_WITH_CUDA=ON -DACCELERATE_WITH_NCCL=ON -DACCELERATE_WITH_HDF5=ON
    -DACCELERATE_WITH_HWLOC=ON -DACCELERATE_WITH_KOKKOS=OFF
    "-DCUDAToolkit_ROOT=$cuda_root"
    "-DNCCL_INCLUDE_DIR=$(dirname "$nccl_h")" "-DNCCL_LIBRARY=$nccl_lib"
    "-DMPI_C_COMPILER=$prefix/bin/mpicc" "-DMPI_CXX_COMPILER=$prefix/bin/mpicxx"
    "-DMPIEXEC_EXECUTABLE=$prefix/bin/mpiexec"
    "-DHDF5_C_COMPILER_EXECUTABLE=$prefix/bin/h5pcc"
    "-DACCELERATE_BUILD_BENCH=$([ "$with_bench" = 1 ] && echo ON || echo OFF)" -DACCELERATE_BUILD_DOCS=OFF
    # One executable per test file: only the gpu tests' files are compiled,
    # each in a compilation of its own, which 16 cores finish sooner than the
    # unity-built bundle of every test file.
    -DACCELERATE_TEST_BUNDLE=OFF
  )
  [ -n "$cudart_lib" ] && args+=("-DCUDA_cudart_LIBRARY=$cudart_lib")
  if [ "$torch_shim" = 1 ]; then
    # As tests/pypi_libtorch.sh does: LibTorch's CMake skips its own CUDA
    # toolkit search (which may put another NCCL or cudart on the link line)
    # when torch::cudart exists; the wheel's libraries find theirs by RUNPATH.
    cat >"$build/torch_cudart_shim.cmake" <<'EOF'
# Written by tests/gpu/run.sh: skip Caffe2's CUDA toolkit discovery.
if(NOT TARGET torch::cudart)
  add_library(torch::cudart INTERFACE IMPORTED GLOBAL)
endif()
EOF
    args+=("-DCMAKE_PROJECT_INCLUDE=$build/torch_cudart_shim.cmake")
  fi
  cmake -S "$root" -B "$build" "${args[@]}"
}

# The gpu tests' executables and scripts' programs, as paths in the build folder.
gpu_outputs() {
  (cd "$build" && ctest -N -L gpu --show-only=json-v1) | "$python" -c '
import json, os, sys
build = sys.argv[1]
outs = {"src/accelerate-hpc", "jobs/train/train"}
for test in json.load(sys.stdin).get("tests", []):
    # ctest names no command for an executable not built yet: the test is
    # then named after its target, which ninja knows as a phony name.
    if not test.get("command"):
        outs.add(test["name"])
    for word in test.get("command") or []:
        if word.startswith(build + "/") and not word.endswith((".sh", ".py")):
            outs.add(os.path.relpath(word, build))
print("\n".join(sorted(outs)))
' "$build"
}

build_targets() {
  if [ "$full" = 1 ] || [ "$generator" != Ninja ]; then
    cmake --build "$build" --parallel "$jobs"
    return
  fi
  local outs
  mapfile -t outs < <(gpu_outputs)
  [ ${#outs[@]} -gt 0 ] || die "ctest lists no test with the gpu label"
  echo "building: ${outs[*]}"
  if [ "$with_bench" = 1 ]; then
    # Tests and benchmarks in one ninja run, so that their compilations
    # share the cores; -k 0 keeps going past a benchmark that fails, which
    # must not cost the tests their run.
    ninja -C "$build" -j "$jobs" -k 0 "${outs[@]}" bench/gpu_train/bench_gpu_train \
      bench/collectives/bench_collectives bench/train/bench_train || echo "run.sh: some targets did not build (see above)"
  fi
  ninja -C "$build" -j "$jobs" "${outs[@]}"
}

# ---------------------------------------------------------------- test
run_ctest() {
  (cd "$build" && ctest -L gpu --output-on-failure --parallel "$jobs" --timeout 600 ${ctest_extra[@]+"${ctest_extra[@]}"}) 2>&1 |
    tee "$out/gpu-ctest.log"
}

# The training job on cuda:0: learns, resumes bit-exactly, under bf16 and fp16;
# then two ranks on the one GPU, which NCCL is expected to refuse.
jobs_on_gpu() {
  local train=$build/jobs/train/train work=$build/gpu-jobs rc=0
  rm -rf "$work"
  mkdir -p "$work"
  mpiexec -n 1 "$build/src/accelerate-hpc" env || rc=1
  run_train() {  # <label> <np> <args...>
    local label=$1 np=$2
    shift 2
    echo "--- train $label on $np rank(s): $*"
    timeout 300 mpiexec -n "$np" "$train" --project-dir "$work/$label" "$@" >"$work/$label.log" 2>&1
  }
  final() { sed -n 's/^train: final eval loss \([0-9.]*\).*/\1/p' "$work/$1.log"; }
  local r
  for r in "plain 1 --checkpoint-every 100" "stopped 1 --checkpoint-every 100 --max-steps 150" \
           "bf16 1 --mixed-precision bf16" "fp16 1 --mixed-precision fp16"; do
    # shellcheck disable=SC2086  # the words of one run
    if run_train $r; then echo "train ${r%% *}: ok"; else echo "train ${r%% *}: FAILED"; rc=1; fi
    grep 'train:' "$work/${r%% *}.log" || tail -n 20 "$work/${r%% *}.log"
  done
  cp -r "$work/stopped" "$work/resumed"
  if run_train resumed 1 --checkpoint-every 100 --resume; then
    grep 'train:' "$work/resumed.log" | tail -n 2
    if [ -n "$(final plain)" ] && [ "$(final plain)" = "$(final resumed)" ]; then
      echo "train resume: bit-exact on cuda (final loss $(final resumed))"
    else
      echo "train resume: FAILED: uninterrupted '$(final plain)', resumed '$(final resumed)'"
      rc=1
    fi
  else
    echo "train resume: FAILED"; tail -n 20 "$work/resumed.log"; rc=1
  fi
  # Two ranks on one GPU: NCCL refuses them, and the group says so on every
  # rank before any collective (comm/nccl/shared_gpu.cpp).
  if run_train shared 2 --max-steps 20; then
    echo "train 2 ranks on one GPU: ran (the shared device was not refused)"
  elif [ "$(grep -c 'share the GPU' "$work/shared.log")" -ge 2 ]; then
    echo "train 2 ranks on one GPU: refused on both ranks as designed (ranks share the GPU)"
  elif grep -qi 'duplicate GPU' "$work/shared.log"; then
    echo "train 2 ranks on one GPU: refused by NCCL itself (duplicate GPU), not by the group's check"
  else
    echo "train 2 ranks on one GPU: failed otherwise:"; tail -n 20 "$work/shared.log"
  fi
  grep -h 'train:.*device' "$work"/*.log | sort -u
  return "$rc"
}

jobs_logged() { jobs_on_gpu 2>&1 | tee "$out/gpu-jobs.log"; }

# The benchmarks of docs/gpu.md: single-GPU training against Hugging Face
# Accelerate, then the CPU collectives and data-parallel training at the
# rank counts the 16 cores allow.
benchmarks() {
  # The raw results travel as one archive (a device call returns few files).
  local b=$build/bench-results
  rm -rf "$b"
  mkdir -p "$b"
  echo "--- bench/gpu_train"
  timeout 420 bash "$root/bench/gpu_train/run.sh" --bench "$build/bench/gpu_train/bench_gpu_train" --python "$python" \
    --rounds "${BENCH_ROUNDS:-2}" --batches "${BENCH_BATCHES:-32,64,128,256,512}" --steps "${BENCH_STEPS:-40}" \
    --warmup 8 --foreach-too --out "$b"
  echo "--- bench/collectives"
  # CPU benchmarks: the CPU device, whatever GPUs the machine has.
  ACCELERATE_USE_CPU=1 BUILD_DIR=$build RANKS="${BENCH_RANKS:-2 4 8 16}" TIME_LIMIT=120 MPIEXEC=mpiexec \
    bash "$root/bench/collectives/run.sh" "$b" --repetitions 7 --ops all_reduce --sizes "${BENCH_SIZES:-4K,1M,16M}" --no-diagnostics | grep -E '^\||ranks:|^\$' || true
  echo "--- bench/train"
  for n in ${BENCH_TRAIN_RANKS:-2 4 8}; do
    ACCELERATE_USE_CPU=1 BUILD_DIR=$build NP=$n ROUNDS=1 TIME_LIMIT=60 WORKLOADS="${BENCH_WORKLOADS:-W1}" MPIEXEC=mpiexec PYTHON=$python \
      bash "$root/bench/train/run.sh" "$b/train_np$n" | grep -E '^\||round' || true
  done
  tar -czf "$out/gpu-bench-raw.tgz" -C "$build" bench-results
}

benchmarks_logged() { benchmarks 2>&1 | tee "$out/gpu-bench.log"; }

# Open MPI and PMIx relocated: the wrapper compiler and a two-rank start.
mpi_smoke() {
  mpicc -showme:compile && mpicc -showme:link && ompi_info --path all | head -n 20
  timeout 60 mpiexec -n 2 hostname
}

# ---------------------------------------------------------------- report
write_report() {
  # A report with a hole beats no report: nothing in here may stop the script.
  set +e
  {
    echo "# Accelerate-HPC on a GPU: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Written by \`tests/gpu/run.sh --stage=$stage\` at commit \`$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)\`."
    echo
    echo "## Machine"
    echo '```'
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_mode,pci.bus_id --format=csv 2>&1
      nvidia-smi -L 2>&1
    else
      echo "nvidia-smi: not found"
    fi
    echo "cores: $(nproc); $(uname -srm); $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"
    echo '```'
    echo
    echo "## Versions"
    echo '```'
    echo "nvcc: $("${nvcc:-nvcc}" --version 2>/dev/null | tail -n1)"
    "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "gpus", torch.cuda.device_count())' 2>&1 | tail -n1
    echo "nccl.h: ${nccl_h:-?} ($(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "${nccl_h:-/dev/null}" 2>/dev/null | awk '{printf "%s%s", (NR>1?".":""), $3}'))"
    echo "nccl lib: ${nccl_lib:-?}; cudart: ${cudart_lib:-toolkit}"
    echo "Open MPI: $(mpirun --version 2>&1 | head -n1)"
    echo "HDF5: $(h5pcc -showconfig 2>/dev/null | grep -E 'HDF5 Version|Parallel HDF5' | tr -s ' ' | paste -sd ';')"
    echo "cmake: $(cmake --version | head -n1); $(g++ --version | head -n1)"
    echo '```'
    echo
    echo "## Steps (seconds)"
    echo
    echo "| step | seconds | exit | ended (UTC) |"
    echo "|---|---|---|---|"
    awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}' "$timings"
    if [ -f "$build/CMakeCache.txt" ]; then
      echo
      echo "## Features (configure)"
      echo '```'
      sed -n '/Accelerate-HPC .* features:/,/launcher for tests/p' "$log" | sed 's/^-- //' | tail -n 12
      echo '```'
    fi
    if [ -f "$out/gpu-ctest.log" ]; then
      echo
      echo "## ctest -L gpu"
      echo
      # The copy taken right after ctest: a later `ctest -N` (the build stage
      # lists the gpu tests) rewrites the build folder's LastTest.log.
      "$python" - "$out/gpu-ctest.log" "$out/gpu-LastTest.log" <<'EOF'
import re, sys
status = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"Test +#\d+: (\S+) \.+\s*\**(.*?)\s+[\d.]+ sec", line)
    if m:
        status[m.group(1)] = m.group(2).strip()
groups = {}
for name, state in status.items():
    groups.setdefault(state, []).append(name)
for state in sorted(groups):
    print(f"- **{state}** ({len(groups[state])}): " + ", ".join(sorted(groups[state])))
# A GoogleTest case that skips inside an executable that passes is invisible
# to ctest; list them with the reasons given.
cases, reasons, current, after_skip = {}, {}, None, False
try:
    lines = open(sys.argv[2], errors="replace").read().splitlines()
except FileNotFoundError:
    lines = []
for line in lines:
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # GoogleTest colours its output on a terminal
    m = re.match(r"\d+/\d+ Testing: (\S+)", line)
    if m:
        current, after_skip = m.group(1), False
        continue
    if current is None:
        continue
    if after_skip and line.strip():
        reasons.setdefault(current, set()).add(line.strip())
        after_skip = False
    if re.search(r"\.cpp:\d+: Skipped$", line):
        after_skip = True
    m = re.match(r"\[  SKIPPED \] (\S+\.\S+)", line)
    if m:
        cases.setdefault(current, set()).add(m.group(1))
print()
print("GoogleTest cases skipped inside the tests above:")
print()
print("```")
for name in sorted(set(cases) | set(reasons)):
    print(f"{name}: {len(cases.get(name, ()))} case(s): " + ", ".join(sorted(cases.get(name, ())))[:400])
    for r in sorted(reasons.get(name, ()))[:4]:
        print(f"    because: {r}")
print("```")
EOF
      echo
      echo "ctest summary:"
      echo '```'
      sed -n '/tests passed/,$p' "$out/gpu-ctest.log" | head -n 60
      echo '```'
    fi
    if [ -f "$out/gpu-jobs.log" ]; then
      echo
      echo "## Training job on cuda:0"
      echo '```'
      grep -E '^(train|---)|device|bit-exact|FAILED|NCCL|Duplicate' "$out/gpu-jobs.log" | head -n 60
      echo '```'
    fi
    if [ -f "$out/gpu-bench.log" ]; then
      echo
      echo "## Benchmarks"
      echo '```'
      grep -vE '^round ' "$out/gpu-bench.log" | head -n 150
      echo '```'
    fi
    echo
    echo "Full logs: gpu-run.log (every command), gpu-ctest.log, gpu-LastTest.log, gpu-jobs.log."
  } >"$report" 2>>"$log"
  set -e
  note "report: $report"
}

# ---------------------------------------------------------------- main
rc=0
step unpack unpack || die "unpacking the .deb files failed (see $log)"
# shellcheck source=/dev/null
. "$prefix/env.sh"
step mpi-smoke mpi_smoke || die "the unpacked Open MPI does not work (OPAL_PREFIX=$OPAL_PREFIX, PMIX_PREFIX=$PMIX_PREFIX; see $log)"
[ "$stage" = unpack ] && { write_report; exit 0; }
find_tools

if [ ! -f "$build/CMakeCache.txt" ] && { [ "$stage" = test ] || [ "$stage" = bench ]; }; then
  die "$build has no build: the machine was not kept warm since the build call; run --stage=all (build and tests in one call)"
fi
if [ ! -f "$build/CMakeCache.txt" ] || [ "$stage" = configure ] || [ "$stage" = all ]; then
  step configure configure || { write_report; die "configure failed (see $log)"; }
fi
[ "$stage" = configure ] && { write_report; exit 0; }

# In the test stage this is an incremental build: nothing to do after a build call.
step build build_targets || { write_report; die "build failed (see $log)"; }
[ "$stage" = build ] && { write_report; exit 0; }
if [ "$stage" = bench ]; then
  step bench benchmarks_logged || rc=1
  write_report
  exit "$rc"
fi

nvidia-smi >>"$log" 2>&1 || note "nvidia-smi failed"
step ctest run_ctest || rc=1
cp "$build/Testing/Temporary/LastTest.log" "$out/gpu-LastTest.log" 2>/dev/null || true
step jobs jobs_logged || rc=1
write_report
exit "$rc"
