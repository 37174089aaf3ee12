#!/usr/bin/env bash
# Relocatable bundle of shardtrain for a machine without Debian's Open MPI,
# HDF5 and OpenBLAS (e.g. a lent GPU machine with only the NVIDIA stack):
#
#   scripts/bundle.sh [BUILD_DIR] [OUT_TARBALL]    # default: build bundle/shardtrain-bundle.tar.gz
#
# Writes the bundle directory next to the tarball (bundle/shardtrain-bundle/)
# and the tarball itself; docs/gpu-check.md describes the layout and use.
#   bin/     shardtrain, shardrun, mpirun (= orterun), orted, ompi_info
#   tests/   BUILD_DIR's gpu_* test programs, *device_mpi* and one comm_* test
#   lib/     every shared library those (and Open MPI's plugins) need, except
#            glibc, libgcc_s and the CUDA/NVIDIA libraries the target provides
#   lib/compat/libstdc++.so.6  used only where the target's is too old (env.sh)
#   lib/openmpi3/, lib/pmix/   Open MPI's and PMIx's MCA plugins (fabric ones included)
#   lib/ucx/   UCX's transport modules (verbs, rdmacm, ...)
#   share/openmpi, share/pmix, etc/openmpi   help texts and configuration
#   data/    the prepared Fashion-MNIST test split and KJV text (if present),
#            with .npz copies for bench/torch_reference.py
#   env.sh   source it: LD_LIBRARY_PATH, PATH and Open MPI's relocation
# Environment: BUNDLE_DATA=0 leaves the data out; BUNDLE_EXTRA="a b" adds
# more programs from BUILD_DIR/bin (or paths) to tests/.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
tarball=${2:-$repo/bundle/shardtrain-bundle.tar.gz}
mkdir -p "$(dirname "$tarball")"
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
name=shardtrain-bundle
stage=$(dirname "$tarball")/$name
ML=/usr/lib/x86_64-linux-gnu

log() { echo "[bundle] $*"; }
die() { echo "[bundle] error: $*" >&2; exit 1; }

[ -x "$build/bin/shardtrain" ] || die "$build/bin/shardtrain not found (build first: scripts/build.sh)"
rm -rf "$stage"
mkdir -p "$stage"/{bin,tests,lib/compat,lib/openmpi3,lib/pmix,share,etc/openmpi,data}

# --- programs --------------------------------------------------------------
copy_elf() {  # SRC DEST: copy, make writable, strip the copy
  cp -L "$1" "$2"
  chmod u+w "$2"
  strip --strip-unneeded "$2" 2>/dev/null || true
}
elfs=()
if [ -x "$build/bin/shardtrain" ]; then
  copy_elf "$build/bin/shardtrain" "$stage/bin/shardtrain"; elfs+=("$stage/bin/shardtrain")
fi
# shardrun is a script that runs the two beside it.
for p in shardrun supervise failure-summary; do
  if [ -x "$build/bin/$p" ]; then cp -L "$build/bin/$p" "$stage/bin/$p"; fi
done
ntests=0
shopt -s nullglob
declare -A seen_test=()
for f in "$build"/tests/gpu_* "$build"/bin/gpu_* "$build"/tests/*device_mpi* "$build"/bin/*device_mpi* \
         "$build"/bin/comm_collectives_test; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  b=$(basename "$f"); [ -z "${seen_test[$b]:-}" ] || continue; seen_test[$b]=1
  copy_elf "$f" "$stage/tests/$b"; elfs+=("$stage/tests/$b"); ntests=$((ntests + 1))
done
for x in ${BUNDLE_EXTRA:-}; do
  f=$x; [ -e "$f" ] || f=$build/bin/$x
  [ -x "$f" ] || die "BUNDLE_EXTRA: $x not found"
  copy_elf "$f" "$stage/tests/$(basename "$f")"; elfs+=("$stage/tests/$(basename "$f")"); ntests=$((ntests + 1))
done
ls "$stage"/tests/gpu_* >/dev/null 2>&1 || log "warning: no gpu_* test programs in $build/bin or $build/tests (build them first)"
# A build without cuDNN's frontend headers has only the materialized
# attention: the GPU check's fused-attention rows would fail on it.
if grep -q "this build has no cuDNN frontend headers" "$build/bin/shardtrain"; then
  log "warning: $build was built without cuDNN's frontend headers (no fused attention): run scripts/install-deps.sh, then reconfigure and rebuild"
fi

# Open MPI's launcher: /usr/bin/mpirun -> alternatives -> orterun.
orterun=$(readlink -f "$(command -v mpirun)")
copy_elf "$orterun" "$stage/bin/orterun"; elfs+=("$stage/bin/orterun")
ln -sf orterun "$stage/bin/mpirun"; ln -sf orterun "$stage/bin/mpiexec"
for p in orted ompi_info; do
  copy_elf "$(readlink -f "$(command -v $p)")" "$stage/bin/$p"; elfs+=("$stage/bin/$p")
done

# --- Open MPI / PMIx plugins, help texts, configuration --------------------
ompi_plugins=$ML/openmpi/lib/openmpi3
pmix_plugins=$ML/pmix2/lib/pmix
# Every plugin, the network fabrics' included: a bundle on a RoCE or
# InfiniBand node runs MPI over UCX (`--mca pml ucx`, shardrun --fabric).
# Their libraries (UCX, libibverbs, librdmacm, libfabric, PSM2) come along
# through ldd below; UCX's transport modules (uct_ib, uct_rdmacm, ...) load
# from lib/ucx (env.sh: UCX_MODULE_DIR). libibverbs' providers (mlx5, rxe,
# ...) are the node's own: a node with an RDMA NIC has rdma-core installed,
# and its providers match its kernel.
for f in "$ompi_plugins"/*.so; do
  copy_elf "$f" "$stage/lib/openmpi3/$(basename "$f")"; elfs+=("$stage/lib/openmpi3/$(basename "$f")")
done
mkdir -p "$stage/lib/ucx"
for f in "$ML"/ucx/*.so.0; do  # the names UCX loads; the other links would copy each module twice more
  [ -f "$f" ] || continue
  copy_elf "$f" "$stage/lib/ucx/$(basename "$f")"; elfs+=("$stage/lib/ucx/$(basename "$f")")
done
for p in ucx_info ib_write_bw; do  # what the doctor and a fabric check run
  command -v "$p" >/dev/null 2>&1 || continue
  copy_elf "$(readlink -f "$(command -v "$p")")" "$stage/bin/$p"; elfs+=("$stage/bin/$p")
done
for f in "$pmix_plugins"/*.so; do copy_elf "$f" "$stage/lib/pmix/$(basename "$f")"; elfs+=("$stage/lib/pmix/$(basename "$f")"); done
cp -rL /usr/share/openmpi "$stage/share/openmpi"
mkdir -p "$stage/share/pmix"
cp -L "$ML"/pmix2/share/pmix/* "$stage/share/pmix/" 2>/dev/null || true
# PMIx's params file names the Debian plugin path; env.sh sets it instead.
grep -v '^mca_base_component_path' "$ML/pmix2/share/pmix-mca-params.conf" > "$stage/share/pmix-mca-params.conf" || true
cp -L /etc/openmpi/*.conf /etc/openmpi/openmpi-default-hostfile "$stage/etc/openmpi/" 2>/dev/null || true

# --- shared libraries ------------------------------------------------------
# glibc and libgcc_s belong to the target (they must match its ld.so); the
# CUDA runtime, cuBLAS, NCCL and the driver come from the target's CUDA 13.
skip_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil\.so|libanl|libnsl|libnss_|libthread_db|libBrokenLocale|libgcc_s|libcuda\.so|libcudart|libcublas|libcublasLt|libnccl|libnvidia|libnvrtc|libnvJitLink|libcufft|libcurand|libcusparse|libcusolver|libcudnn|libcupti|libnvToolsExt)'
declare -A have=()
for e in "${elfs[@]}"; do
  [[ "$(file -L "$e")" == *ELF* ]] || continue
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ "$soname" =~ $skip_re ]] && continue
    [ -n "${have[$soname]:-}" ] && continue
    [ "$path" = "not" ] && { [[ "$e" == */lib/* ]] && continue; die "$e: $soname not found"; }
    have[$soname]=1
    dest=$stage/lib/$soname
    [ "$soname" = "libstdc++.so.6" ] && dest=$stage/lib/compat/$soname
    # readlink -f resolves Debian's alternatives (libopenblas.so.0 ->
    # /etc/alternatives -> openblas-pthread/libopenblas.so.0); the copy keeps
    # the SONAME name the loader asks for.
    copy_elf "$(readlink -f "$path")" "$dest"
  done < <(ldd "$e" 2>/dev/null)
done

# The newest GLIBCXX version the bundled programs need: env.sh uses the
# target's libstdc++ when it offers it (a newer one is backward compatible and
# what the target's own libraries expect) and the bundled one otherwise.
need_glibcxx=$(for e in "${elfs[@]}"; do objdump -T "$e" 2>/dev/null; done | grep -o 'GLIBCXX_3\.4\.[0-9]*' | sort -uV | tail -1)

# --- data ------------------------------------------------------------------
data_note="none"
if [ "${BUNDLE_DATA:-1}" = 1 ]; then
  # Fashion-MNIST's train split (46 MB) would not fit a 64 MiB transfer; the
  # test split (10k images, 7.6 MB) serves as both train and test data for the
  # CPU-vs-GPU comparison (scripts/gpu-check-train.sh).
  if [ -f "$repo/data/fashion-mnist/test/part-00000.h5" ]; then
    mkdir -p "$stage/data/fashion-mnist"; cp -r "$repo/data/fashion-mnist/test" "$stage/data/fashion-mnist/"
  fi
  if [ -f "$repo/data/kjv/train/part-00000.h5" ]; then cp -r "$repo/data/kjv" "$stage/data/"; fi
  # .npz copies for bench/torch_reference.py, whose PyTorch there may lack h5py.
  if /usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null; then
    find "$stage/data" -name 'part-*.h5' -print0 | xargs -0 -r /usr/bin/python3 -c '
import sys, h5py, numpy as np
for f in sys.argv[1:]:
    with h5py.File(f, "r") as h:
        extra = {k: np.float64(v) for k, v in h["x"].attrs.items() if k in ("normalize_mean", "normalize_std")}
        np.savez_compressed(f[:-3] + ".npz", x=h["x"][...], y=h["y"][...], num_classes=np.int64(h.attrs["num_classes"]), **extra)
'
  else
    log "warning: no h5py for /usr/bin/python3: no .npz copies of the data (the PyTorch reference needs h5py there)"
  fi
  data_note=$(cd "$stage/data" && du -sh --apparent-size . | cut -f1)
fi

# --- env.sh ----------------------------------------------------------------
cat > "$stage/env.sh" <<EOF
# Source me (bash): sets up shardtrain's relocatable bundle in this directory.
ST_NEED_GLIBCXX=${need_glibcxx:-GLIBCXX_3.4}
EOF
cat >> "$stage/env.sh" <<'EOF'
ST_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ST_BUNDLE

# CUDA runtime, cuBLAS, NCCL and cuDNN from the target: the toolkit, then
# the pip packages of the Python that has PyTorch (nvidia/<pkg>/lib; each
# package has its own folder, so a folder counts when it holds any of them).
st_cuda_dirs=""
st_add() { case ":$st_cuda_dirs:" in *":$1:"*) ;; *) st_cuda_dirs=${st_cuda_dirs:+$st_cuda_dirs:}$1 ;; esac; }
for d in ${CUDA_HOME:-/usr/local/cuda}/lib64 /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && ls "$d"/libcudart.so* "$d"/libcublas.so* >/dev/null 2>&1 && st_add "$(cd "$d" && pwd -P)"
done
st_sites=""
for py in "${ST_PYTHON:-}" /opt/torch/.venv/bin/python3 python3; do
  [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
  st_sites="$st_sites $("$py" -c 'import site,sys; print(" ".join(site.getsitepackages()+[site.getusersitepackages()]))' 2>/dev/null)"
done
for s in $st_sites /opt/torch/.venv/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages; do
  for d in "$s"/nvidia/*/lib "$s"/nvidia/*/lib64; do
    [ -d "$d" ] || continue
    for st_lib in libcudart.so libcublas libnccl.so libnvJitLink.so libnvrtc.so libcudnn.so; do
      if compgen -G "$d/$st_lib*" >/dev/null; then st_add "$(cd "$d" && pwd -P)"; break; fi
    done
  done
done
export ST_CUDA_LIB_DIRS=$st_cuda_dirs

# libstdc++: the target's if it has every GLIBCXX version the bundle needs.
st_sys_stdcxx=$( (ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF; exit}') )
[ -n "$st_sys_stdcxx" ] || for f in /usr/lib/x86_64-linux-gnu/libstdc++.so.6 /usr/lib64/libstdc++.so.6; do [ -e "$f" ] && st_sys_stdcxx=$f && break; done
st_compat=""
if [ "${ST_BUNDLE_LIBSTDCXX:-auto}" = 1 ] || [ -z "$st_sys_stdcxx" ] || ! grep -qa "$ST_NEED_GLIBCXX" "$st_sys_stdcxx" 2>/dev/null; then
  [ "${ST_BUNDLE_LIBSTDCXX:-auto}" = 0 ] || st_compat=$ST_BUNDLE/lib/compat
fi
if [ -n "$st_compat" ]; then ST_LIBSTDCXX="bundled ($st_compat/libstdc++.so.6; the system's lacks $ST_NEED_GLIBCXX or ST_BUNDLE_LIBSTDCXX=1)"; else ST_LIBSTDCXX="system ($st_sys_stdcxx has $ST_NEED_GLIBCXX)"; fi
export ST_LIBSTDCXX

export LD_LIBRARY_PATH=$ST_BUNDLE/lib${st_compat:+:$st_compat}${st_cuda_dirs:+:$st_cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$ST_BUNDLE/bin:$PATH
# UCX's transport modules (verbs, rdmacm, ...) from the bundle.
export UCX_MODULE_DIR=$ST_BUNDLE/lib/ucx

# Open MPI 4.1 relocation (opal/mca/installdirs/env): OPAL_PREFIX alone is not
# enough with Debian's build, whose libdir, pkglibdir, pkgdatadir and
# sysconfdir are configured as absolute paths, so each is set.
export OPAL_PREFIX=$ST_BUNDLE
export OPAL_EXEC_PREFIX=$ST_BUNDLE
export OPAL_BINDIR=$ST_BUNDLE/bin
export OPAL_LIBDIR=$ST_BUNDLE/lib
export OPAL_PKGLIBDIR=$ST_BUNDLE/lib/openmpi3
export OPAL_DATAROOTDIR=$ST_BUNDLE/share
export OPAL_DATADIR=$ST_BUNDLE/share
export OPAL_PKGDATADIR=$ST_BUNDLE/share/openmpi
export OPAL_SYSCONFDIR=$ST_BUNDLE/etc/openmpi
# PMIx 4.2 (external to Open MPI on Debian): its installdirs and plugin path.
export PMIX_PREFIX=$ST_BUNDLE
export PMIX_LIBDIR=$ST_BUNDLE/lib
export PMIX_PKGLIBDIR=$ST_BUNDLE/lib/pmix
export PMIX_DATADIR=$ST_BUNDLE/share
export PMIX_PKGDATADIR=$ST_BUNDLE/share/pmix
export PMIX_SYSCONFDIR=$ST_BUNDLE/share
export PMIX_MCA_mca_base_component_path=$ST_BUNDLE/lib/pmix
# Plugins and params explicitly too (belt and braces; ompi_info shows them).
export OMPI_MCA_mca_base_component_path=$ST_BUNDLE/lib/openmpi3
export OMPI_MCA_mca_base_param_files=$ST_BUNDLE/etc/openmpi/openmpi-mca-params.conf
export OMPI_MCA_orte_default_hostfile=$ST_BUNDLE/etc/openmpi/openmpi-default-hostfile
# Root, possibly a VM without cross-memory attach, 2 ranks on few cores.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# One node: mpirun (and a singleton's MPI_Init) must not need ssh/rsh, which
# a bare machine lacks ("plm_rsh_agent ... could not be found"); local ranks
# are forked. Export your own value before sourcing for several nodes.
export OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent:-false}
unset st_cuda_dirs st_sites st_sys_stdcxx st_compat d s py f
unset -f st_add
EOF

cat > "$stage/BUNDLE-INFO" <<EOF
built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(ldd --version | head -1)
repo: $repo ($(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo ?)$(cd "$repo" && git diff --quiet 2>/dev/null || echo ", dirty"))
build dir: $build
glibcxx needed: ${need_glibcxx:-none}
tests: $(cd "$stage/tests" && ls | tr '\n' ' ')
data: $data_note
EOF

# --- tarball ---------------------------------------------------------------
rm -f "$tarball"
case "$tarball" in
  *.xz) tar -C "$(dirname "$stage")" -cf - "$name" | xz -9 -T0 > "$tarball" ;;  # ~35% smaller, ~1 min
  *)    tar -C "$(dirname "$stage")" -cf - "$name" | gzip -9 > "$tarball" ;;
esac
log "programs: $(ls "$stage/bin" | tr '\n' ' ')"
log "tests ($ntests): $(ls "$stage/tests" | tr '\n' ' ')"
log "libraries: $(ls "$stage/lib" | grep -c '\.so') (+ $(ls "$stage/lib/openmpi3" | wc -l) Open MPI plugins, $(ls "$stage/lib/ucx" | wc -l) UCX modules, $(ls "$stage/lib/pmix" | wc -l) PMIx plugins), libstdc++ need: ${need_glibcxx:-none}"
log "data: $data_note"
log "directory: $stage ($(du -sh "$stage" | cut -f1))"
log "tarball:   $tarball ($(du -h "$tarball" | cut -f1), $(stat -c %s "$tarball") bytes)"
