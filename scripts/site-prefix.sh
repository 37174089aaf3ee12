#!/usr/bin/env bash
# A site's prefixes, as a cluster's modules or Spack lay them out: Open MPI,
# parallel HDF5, OpenBLAS and libdeflate, each in a folder of its own with
# bin/ (mpicc, mpirun; h5pcc), include/ and lib/, and no pkg-config file
# anywhere. They are copies of this machine's Debian packages, their paths
# rewritten: what changes is where they are and how a build must find them,
# which is what scripts/test-sanitizers.sh's tsan build checks
# (docs/building.md).
#   scripts/site-prefix.sh DIR
# Prints the CMake arguments that point a build at them. The copied Open MPI
# finds itself through OPAL_PREFIX=DIR/openmpi (Open MPI's own way to move
# an installation), which configuring and running need, as a site's module
# would set it.
set -euo pipefail
site=${1:?usage: scripts/site-prefix.sh DIR}
mkdir -p "$site"
site=$(cd "$site" && pwd)
multiarch=$(gcc -print-multiarch)
usrlib=/usr/lib/$multiarch

# Open MPI in Debian's layout under its own prefix: the wrappers and the
# launcher, headers, libraries (under their sonames, as the programs built
# against them load them), components and help files.
ompi=$site/openmpi
ompi_lib=$ompi/lib/$multiarch/openmpi/lib
mkdir -p "$ompi/bin" "$ompi/share"
cp /usr/bin/opal_wrapper /usr/bin/orterun /usr/bin/orted "$ompi/bin/"
for w in mpicc mpicxx; do ln -sf opal_wrapper "$ompi/bin/$w"; done
for l in mpirun mpiexec; do ln -sf orterun "$ompi/bin/$l"; done
mkdir -p "$ompi/lib/$multiarch"
cp -rL "$usrlib/openmpi" "$ompi/lib/$multiarch/"
for l in mpi open-rte open-pal; do cp -L "$usrlib/lib$l.so.40" "$ompi_lib/"; done
cp -r /usr/share/openmpi "$ompi/share/"

# Parallel HDF5: the headers, the shared library under its soname (the
# programs built against it load it from here), the static ones h5pcc links
# by default, and h5pcc, whose -show and -showconfig FindHDF5 reads,
# pointing here.
hdf5=$site/hdf5
mkdir -p "$hdf5/bin" "$hdf5/include" "$hdf5/lib"
cp /usr/include/hdf5/openmpi/*.h "$hdf5/include/"
real=$(readlink -f "$usrlib/hdf5/openmpi/libhdf5.so")
soname=$(objdump -p "$real" | awk '$1 == "SONAME" {print $2}')
cp "$real" "$hdf5/lib/$soname"
ln -sf "$soname" "$hdf5/lib/libhdf5.so"
cp "$usrlib/libhdf5_openmpi.settings" "$hdf5/lib/"
cp "$usrlib/hdf5/openmpi/libhdf5.a" "$usrlib/hdf5/openmpi/libhdf5_hl.a" "$hdf5/lib/"  # what h5pcc links by default
sed -e "s|^prefix=.*|prefix=\"$hdf5\"|" -e 's|^libdir=.*|libdir="${prefix}/lib"|' \
    -e 's|^libdevdir=.*|libdevdir="${prefix}/lib"|' -e 's|^includedir=.*|includedir="${prefix}/include"|' \
    /usr/bin/h5pcc.openmpi >"$hdf5/bin/h5pcc"
chmod +x "$hdf5/bin/h5pcc"

# OpenBLAS (its CBLAS headers) and libdeflate: headers and libraries.
blas_lib=$(readlink -f "$usrlib/libopenblas.so.0")  # .../openblas-pthread/ (or -openmp, -serial)
blas_include=/usr/include/$multiarch/$(basename "$(dirname "$blas_lib")")
mkdir -p "$site/openblas/include" "$site/openblas/lib" "$site/libdeflate/include" "$site/libdeflate/lib"
cp "$blas_include"/*.h "$site/openblas/include/"
cp "$blas_lib" "$site/openblas/lib/libopenblas.so.0"
ln -sf libopenblas.so.0 "$site/openblas/lib/libopenblas.so"
cp /usr/include/libdeflate.h "$site/libdeflate/include/"
cp "$usrlib/libdeflate.so.0" "$site/libdeflate/lib/"
ln -sf libdeflate.so.0 "$site/libdeflate/lib/libdeflate.so"

echo "-DMPI_HOME=$ompi -DHDF5_ROOT=$hdf5 -DOpenBLAS_ROOT=$site/openblas -Dlibdeflate_ROOT=$site/libdeflate"
