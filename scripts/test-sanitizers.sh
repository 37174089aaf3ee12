#!/usr/bin/env bash
# The unit and MPI tests under AddressSanitizer + UndefinedBehaviorSanitizer
# and under ThreadSanitizer (CMake presets asan and tsan: Debug, no CUDA).
# Both presets build with clang 22 as unity builds (CMAKE_UNITY_BUILD) and
# link with lld 22. A subset, to keep CI short: the unit and MPI tests of
# every layer under ASan; under TSan those of the layers that start threads (comm, telemetry,
# io, parallel, checkpoint, train: core, kernels, nn and optim start none);
# the integration and fault tests, which drive the whole program through
# mpirun, run in the release build only. The asan build also runs the
# libFuzzer targets (scripts/fuzz.sh) for FUZZ_SECONDS each (default 10, a
# smoke test of the committed seeds and a little beyond; scripts/fuzz.sh
# alone runs 30 s per target, or what it is given).
# The tsan build also checks the build off Debian's paths: its parallel
# HDF5, OpenBLAS and libdeflate come from a site's prefixes.
#   scripts/test-sanitizers.sh [asan|tsan]...   # default: both
# Suppressions (tests/sanitizers/lsan.supp) cover the uninstrumented MPI and
# HDF5 libraries only.
set -euo pipefail
cd "$(dirname "$0")/.."
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(asan tsan)
supp=$PWD/tests/sanitizers
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
# ThreadSanitizer sees the memory accesses and the locks of instrumented code
# only. Open MPI progresses every request from whichever thread polls (a
# receive into one engine's buffer may be copied by another engine's thread)
# and synchronizes with atomics it cannot see, so every buffer MPI filled
# would look like a race with the thread that reads it, and its libevent's
# locks like deadlocks. ignore_noninstrumented_modules makes TSan ignore what
# the libraries it cannot see do (the MPI stack, HDF5, libstdc++'s compiled
# part); races between our own threads are still reported.
export TSAN_OPTIONS="ignore_noninstrumented_modules=1:halt_on_error=1:second_deadlock_stack=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Stacks name our functions when a symbolizer is installed (llvm's, of any
# version; the sanitizers find none on their own under clang 22's name).
symbolizer=$(command -v llvm-symbolizer || true)
[ -z "$symbolizer" ] || export ASAN_SYMBOLIZER_PATH=$symbolizer TSAN_SYMBOLIZER_PATH=$symbolizer
# Open MPI's shared-memory transport maps memory ASan cannot shadow at its
# fixed addresses; the TCP and self transports are enough for tests.
export OMPI_MCA_btl="self,tcp"
all_layers='(core|kernels|nn|optim|comm|telemetry|io|parallel|checkpoint|train)_'
threaded_layers='(comm|telemetry|io|parallel|checkpoint|train)_'
# Tests that assert a rate or a duration (and, for it, work at full scale:
# 10 million samples in BuildQuickly): a sanitizer build is several times
# slower, so they run in the release build only.
timed='RateLimiter|StagedRate|AreFast|BuildQuickly'
base_path=$PATH
for preset in "${presets[@]}"; do
  export PATH=$base_path  # the tsan build's site prefix (below) stays its own
  unset OPAL_PREFIX
  layers=$all_layers
  [ "$preset" = tsan ] && layers=$threaded_layers
  echo "== $preset: configure and build the tests"
  if [ "$preset" = tsan ]; then
    # This build finds Open MPI, parallel HDF5, OpenBLAS and libdeflate as
    # on a cluster with modules or Spack: each under a prefix of its own, no
    # pkg-config file (scripts/site-prefix.sh); its tests load them, and run
    # under that Open MPI's mpirun (docs/building.md).
    site=$PWD/build-tsan-site
    read -ra site_args < <(scripts/site-prefix.sh "$site")
    export OPAL_PREFIX=$site/openmpi PATH=$site/openmpi/bin:$PATH  # what `module load` would set
    PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH='' cmake --preset tsan "${site_args[@]}" >/dev/null
    # (FindHDF5 names its library HDF5_C_LIBRARY_hdf5 where it asked
    # h5pcc, HDF5_hdf5_LIBRARY_RELEASE where it searched HDF5_ROOT.)
    for lib in MPI_mpi_LIBRARY MPIEXEC_EXECUTABLE 'HDF5_(C_LIBRARY_hdf5|hdf5_LIBRARY_RELEASE)' _st_openblas_library \
               _st_libdeflate_library; do
      grep -qE "^$lib:FILEPATH=$site/" build-tsan/CMakeCache.txt ||
        { echo "tsan: $lib is not the site prefix's: $(grep -E "^$lib:" build-tsan/CMakeCache.txt)" >&2; exit 1; }
    done
  else
    cmake --preset "$preset" >/dev/null
  fi
  targets=$(cd "build-$preset" && ninja -t targets all | grep -oE "^bin/$layers[a-z0-9_]*_test" | sort -u)
  ninja -C "build-$preset" $targets shardtrain_mpi_test_main >/dev/null
  if [ "$preset" = tsan ]; then
    loaded=$(ldd build-tsan/bin/io_dataset_test)
    [ "$(command -v mpirun)" = "$site/openmpi/bin/mpirun" ] || { echo "tsan: mpirun is not the site's" >&2; exit 1; }
    for lib in libmpi libhdf5 libopenblas libdeflate; do
      grep -q "$lib.* => $site/" <<<"$loaded" || { echo "tsan: the tests do not load $lib from $site" >&2; exit 1; }
    done
    echo "== tsan: built against $site's Open MPI, HDF5, OpenBLAS and libdeflate, no pkg-config"
  fi
  echo "== $preset: run"
  ctest --test-dir "build-$preset" --output-on-failure -j2 -L unit -R "^$layers" -E "$timed"
  # Under mpirun, LeakSanitizer reports what Open MPI's dlopen'ed components
  # keep at exit, with frames it cannot name (so no suppression matches
  # them): leak checking stays on for the unit tests only. Memory errors
  # and undefined behaviour are still fatal.
  # Under ASan the MPI tests run on 1 to 3 ranks, and on 4 only where 4 is
  # a shape of its own: comm_topology_test's two nodes of two ranks (the
  # hierarchical algorithms). Elsewhere 3 ranks take the paths 4 do (the
  # uneven splits: a shard, segment or sampler share not the same on every
  # rank), the release build runs them on 4, and a 4-rank test takes both
  # cores: they ran one at a time, 26 s of CI, and the collectives sweep
  # over a minute more. Under TSan every MPI test runs on 1 and 2 ranks: 3
  # and 4 ranks add no thread (each rank has the same engine, loader and
  # caller threads, and a rank's threads meet other ranks only through MPI,
  # which TSan cannot see), and they took a minute of CI on their own.
  skip='\.np4$'
  [ "$preset" = tsan ] && skip='\.np[34]$'
  ASAN_OPTIONS="detect_leaks=0" ctest --test-dir "build-$preset" --output-on-failure -j2 -L mpi -R "^$layers" -E "$skip"
  [ "$preset" = tsan ] ||
    ASAN_OPTIONS="detect_leaks=0" ctest --test-dir "build-$preset" --output-on-failure -R '^comm_topology_test\.np4$'
  if [ "$preset" = asan ]; then
    echo "== asan: fuzz (${FUZZ_SECONDS:-10} s per target)"
    ninja -C build-asan $(cd build-asan && ninja -t targets all | grep -oE '^fuzz_[a-z]+' | sort -u) >/dev/null
    scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
  fi
done
