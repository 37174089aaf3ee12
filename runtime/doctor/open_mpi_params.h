// Open MPI's MCA parameters as a rank sees them: OMPI_MCA_<name> in the
// environment (mpirun --mca sets it), then $HOME/.openmpi/mca-params.conf,
// then the installation's openmpi-mca-params.conf ($OPAL_SYSCONFDIR's where
// Open MPI was relocated). Debian's says `pml = ^ucx`,
// which keeps MPI's traffic on TCP even where UCX could use RDMA.
#pragma once

#include "runtime/doctor/node_report.h"
#include "runtime/doctor/sys_root.h"

#include <optional>
#include <string>
#include <vector>

namespace shardtrain::doctor {

struct McaSetting {
  std::string value;   // "^ucx", "ucx", "ob1"
  std::string source;  // "OMPI_MCA_pml", or the file it came from
};

std::optional<McaSetting> open_mpi_param(const SysRoot& sys, const Environment& env, const std::string& name);

// Whether a component list ("^ucx,ofi" excludes, "ob1,cm" includes only)
// rules out `component`. An empty list rules out nothing.
bool mca_list_excludes(const std::string& list, const std::string& component);

// The (transport, device) pairs `ucx_info -d` lists: {"rc_verbs", "rxe0:1"}.
std::vector<std::pair<std::string, std::string>> parse_ucx_devices(const std::string& ucx_info_output);

}  // namespace shardtrain::doctor
