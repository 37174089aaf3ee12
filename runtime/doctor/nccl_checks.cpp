// NCCL on a GPU node: the version this process loads, its network plugin,
// and the NCCL_* settings the job runs with (recorded, and checked against
// the interfaces that exist).
#include "runtime/comm/gpu_backend.h"
#include "runtime/doctor/checks.h"

#include <fmt/format.h>

#include <sstream>

namespace shardtrain::doctor {

void check_nccl(const ProbeContext& ctx, NodeReport& r) {
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& [name, value] : ctx.env)
    if (name.rfind("NCCL_", 0) == 0) settings[name] = value;
  r.facts["nccl_env"] = settings;

  const std::string ifname = ctx.env_or("NCCL_SOCKET_IFNAME");
  if (!ifname.empty() && ifname[0] != '^' && ifname[0] != '=') {
    // A prefix: "eth" matches eth0, eth1.
    bool found = false;
    for (const auto& dev : ctx.sys.list("/sys/class/net")) found = found || dev.rfind(ifname, 0) == 0;
    if (!found)
      r.add("nccl-env", Verdict::fail, fmt::format("NCCL_SOCKET_IFNAME={} matches no interface here", ifname),
            "set it to the interface of the cluster network (see the recommended environment)");
  }

  if (ctx.gpu_count() == 0 || !ctx.live) return;
  std::string why;
  const std::string version = comm::nccl_loaded_version(&why);
  r.facts["nccl"] = version.empty() ? why : version;
  r.fingerprint["nccl"] = version.substr(0, version.find(' '));
  if (version.empty()) {
    r.add("nccl", Verdict::fail, "NCCL does not load: " + why,
          "put libnccl.so.2 on LD_LIBRARY_PATH (PyTorch's pip package has one: site-packages/nvidia/nccl/lib)");
    return;
  }
  r.add("nccl", Verdict::ok, "NCCL " + version);
  std::string plugin = ctx.env_or("NCCL_NET_PLUGIN");
  if (plugin.empty()) {
    std::stringstream dirs(ctx.env_or("LD_LIBRARY_PATH"));
    for (std::string dir; plugin.empty() && std::getline(dirs, dir, ':');)
      if (!dir.empty() && ctx.sys.exists(dir + "/libnccl-net.so")) plugin = dir + "/libnccl-net.so";
  }
  r.facts["nccl_net_plugin"] = plugin;
  r.add("nccl-net", Verdict::ok,
        plugin.empty() ? "NCCL's own IB/RoCE and socket transports (no network plugin)"
                       : "NCCL network plugin: " + plugin);
}

}  // namespace shardtrain::doctor
