#!/usr/bin/env bash
# Installs every Debian package that shardtrain's build, tests, demo and data
# need. Idempotent: packages already present are left alone, and apt-get is not
# called at all when nothing is missing. The CUDA toolkit is detected, never
# installed (it lives at /usr/local/cuda on the build machines).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  # MPI and its transport
  openmpi-bin libopenmpi-dev libucx-dev
  # parallel HDF5 (the MPI-enabled build) and its command-line tools
  libhdf5-openmpi-dev hdf5-tools
  # BLAS; oneDNN (the CPU's convolutions, and its bf16 products)
  libopenblas-dev libdnnl-dev
  # tests and micro-benchmarks; the format and lint checks of CI (clang-tidy
  # 22, from bookworm-security: it skips the system headers' code, a third
  # of version 14's time on this tree); clang 22 and its runtimes for the
  # sanitizer builds (half GCC's compile time there) and libFuzzer, and lld
  # 22, their linker (a fifth of GNU ld's time for the sanitized tests)
  googletest libgtest-dev libgmock-dev libbenchmark-dev clang-format clang-tidy-22
  clang-22 libclang-rt-22-dev lld-22
  # parsing, formatting, CLI; fast CRC-32 (libdeflate)
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libfmt-dev libdeflate-dev
  # the object-store source: HTTP(S) and SigV4's HMAC-SHA256
  libcurl4-openssl-dev libssl-dev
  # data sets that ship with the OS
  dataset-fashion-mnist bible-kjv
  # Python helpers (format round trips with h5py, reports with matplotlib)
  python3 python3-numpy python3-h5py python3-matplotlib
  # a venv for the PyPI packages below
  python3-venv
  # emulated multi-node tests (ip, tc), fault tests (pgrep); the chaos soak
  # takes the stacks of a job that should have ended with gdb
  iproute2 procps gdb
  # the Slurm test (a one-node Slurm of its own, munge for its credentials);
  # UCX's tools, which `shardtrain doctor` asks what UCX reaches
  slurmctld slurmd slurm-client munge ucx-utils
  # Soft-RoCE test nodes (launch/rocenodes): QEMU and the tools that build their image
  qemu-system-x86 qemu-utils debootstrap e2fsprogs
  # the object-store tests' S3 server (launch/s3store): a one-node Ceph and its gateway
  ceph-mon ceph-osd radosgw ceph-common uuid-runtime curl
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all ${#packages[@]} packages present"
fi

if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
  nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  echo "install-deps: CUDA toolkit found: $("$nvcc_bin" --version | tail -n 2 | head -n 1)"
  # cuDNN's C++ frontend (header-only; the fused attention of the CUDA
  # backend) ships on PyPI, not in Debian: into a venv of Debian's Python,
  # where cmake/cudnn_frontend.cmake looks for its include/ folder.
  repo=$(cd "$(dirname "$0")/.." && pwd)
  venv=$repo/.venv/cudnn-frontend
  frontend_version=1.32.0
  frontend=nvidia-cudnn-frontend==$frontend_version
  # Installed where missing, and replaced where another version is there
  # (the headers the build was written against).
  have=""
  if [ -x "$venv/bin/python" ]; then
    have=$("$venv/bin/python" -m pip show nvidia-cudnn-frontend 2>/dev/null | sed -n 's/^Version: //p') || have=""
  fi
  if [ "$have" != "$frontend_version" ]; then
    echo "install-deps: installing $frontend into $venv${have:+ (replacing $have)}"
    [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$frontend"
  fi
else
  echo "install-deps: no CUDA toolkit at /usr/local/cuda; the CUDA backend will not be built"
fi

# MLPerf's log compliance checker (PyPI's mlperf-logging, pure Python), for
# the test that checks mllog.txt against the training rules: into a venv of
# Debian's Python.
repo=$(cd "$(dirname "$0")/.." && pwd)
mlperf_venv=$repo/.venv/mlperf-logging
mlperf_version=4.1.68
mlperf_have=""
if [ -x "$mlperf_venv/bin/python" ]; then
  mlperf_have=$("$mlperf_venv/bin/python" -m pip show mlperf-logging 2>/dev/null | sed -n 's/^Version: //p') || mlperf_have=""
fi
if [ "$mlperf_have" != "$mlperf_version" ]; then
  echo "install-deps: installing mlperf-logging==$mlperf_version into $mlperf_venv${mlperf_have:+ (replacing $mlperf_have)}"
  [ -x "$mlperf_venv/bin/python" ] || /usr/bin/python3 -m venv "$mlperf_venv"
  "$mlperf_venv/bin/python" -m pip install -q --disable-pip-version-check "mlperf-logging==$mlperf_version"
fi
