#include "io/mpio.h"

#include "runtime/core/error.h"

#include <vector>

namespace shardtrain::io::mpio {

h5::PropList file_access(MPI_Comm comm) {
  h5::PropList fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), "cannot create file access properties"));
  h5::check_status(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), "cannot select the MPI-IO driver");
  return fapl;
}

h5::PropList transfer(Transfer mode) {
  h5::PropList dxpl(h5::check(H5Pcreate(H5P_DATASET_XFER), "cannot create transfer properties"));
  h5::check_status(
      H5Pset_dxpl_mpio(dxpl.get(), mode == Transfer::collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
      "cannot set the transfer mode");
  return dxpl;
}

std::string actual_io_mode(hid_t dxpl) {
  H5D_mpio_actual_io_mode_t mode;
  if (H5Pget_mpio_actual_io_mode(dxpl, &mode) < 0) return "unknown";
  switch (mode) {
    case H5D_MPIO_NO_COLLECTIVE: return "independent";
    case H5D_MPIO_CHUNK_INDEPENDENT: return "chunk-independent";
    case H5D_MPIO_CHUNK_COLLECTIVE: return "chunk-collective";
    case H5D_MPIO_CHUNK_MIXED: return "chunk-mixed";
    case H5D_MPIO_CONTIGUOUS_COLLECTIVE: return "contiguous-collective";
  }
  return "unknown";
}

std::string no_collective_cause(hid_t dxpl) {
  uint32_t local = 0, global = 0;
  if (H5Pget_mpio_no_collective_cause(dxpl, &local, &global) < 0) return "unknown";
  const uint32_t cause = local | global;
  if (cause == H5D_MPIO_COLLECTIVE) return "";
  // The causes HDF5 1.10 defines, in its words.
  const std::pair<uint32_t, const char*> names[] = {
      {H5D_MPIO_SET_INDEPENDENT, "independent transfer was requested"},
      {H5D_MPIO_DATATYPE_CONVERSION, "a datatype conversion is needed"},
      {H5D_MPIO_DATA_TRANSFORMS, "a data transform is set"},
      {H5D_MPIO_MPI_OPT_TYPES_ENV_VAR_DISABLED, "MPI derived types are disabled"},
      {H5D_MPIO_NOT_SIMPLE_OR_SCALAR_DATASPACES, "a dataspace is neither simple nor scalar"},
      {H5D_MPIO_NOT_CONTIGUOUS_OR_CHUNKED_DATASET, "the dataset is neither contiguous nor chunked"},
      {H5D_MPIO_PARALLEL_FILTERED_WRITES_DISABLED, "parallel writes of filtered data are disabled"},
      {H5D_MPIO_ERROR_WHILE_CHECKING_COLLECTIVE_POSSIBLE, "an error while checking whether collective I/O is possible"},
  };
  std::string out;
  for (const auto& [bit, name] : names)
    if (cause & bit) out += (out.empty() ? "" : "; ") + std::string(name);
  return out.empty() ? fmt::format("cause bits {:#x}", cause) : out;
}

}  // namespace shardtrain::io::mpio
