// RDMA ports: up or down, InfiniBand or RoCE, the RoCE v2 GID a job should
// use and its MTU; recommends NCCL_IB_HCA, NCCL_IB_GID_INDEX,
// NCCL_SOCKET_IFNAME and UCX_NET_DEVICES, and says where the job's own
// settings contradict what is there.
#include "runtime/doctor/checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace shardtrain::doctor {
namespace {

std::string join(const std::vector<std::string>& items, const char* sep = ",") {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

std::string ProbeContext::env_or(const std::string& name, const std::string& fallback) const {
  const auto it = env.find(name);
  return it == env.end() ? fallback : it->second;
}

bool ProbeContext::has_active_rdma() const {
  return std::any_of(rdma.begin(), rdma.end(), [](const RdmaDevice& d) { return d.any_port_active(); });
}

bool ProbeContext::has_active_hardware_rdma() const {
  return std::any_of(rdma.begin(), rdma.end(), [](const RdmaDevice& d) { return !d.software && d.any_port_active(); });
}

std::string default_route_interface(const SysRoot& sys) {
  const auto route = sys.read("/proc/net/route");
  if (!route) return "";
  std::stringstream ss(*route);
  std::string line;
  std::getline(ss, line);  // the header
  while (std::getline(ss, line)) {
    std::stringstream fields(line);
    std::string iface, dest;
    if (fields >> iface >> dest && dest == "00000000") return iface;
  }
  return "";
}

namespace {

// What the ports add up to, for the recommendations and the cross-checks.
struct PortSummary {
  std::vector<std::string> active, active_hardware, down;  // "dev:port"
  std::set<int> gid_indexes;                               // RoCE v2 entries in use
  std::string roce_netdev;                                 // the first RoCE port's interface
};

// An active RoCE port: its MTU and the GID entry a job should use.
void check_roce_port(const RdmaPort& p, const std::string& name, nlohmann::json& port, PortSummary& sum,
                     NodeReport& r) {
  const int mtu = p.roce_active_mtu();
  port["roce_mtu"] = mtu;
  if (mtu > 0 && mtu < 4096)
    r.add("roce-mtu", Verdict::warn,
          fmt::format("{} runs RoCE at MTU {} because {} has MTU {}", name, mtu, p.netdev, p.netdev_mtu),
          fmt::format("set MTU 9000 on {} and every switch port on the path (`ip link set {} mtu 9000`) for "
                      "RoCE MTU 4096",
                      p.netdev, p.netdev));
  const auto gid = routable_roce_v2_gid(p);
  if (gid) {
    sum.gid_indexes.insert(gid->index);
    if (sum.roce_netdev.empty()) sum.roce_netdev = gid->netdev.empty() ? p.netdev : gid->netdev;
    port["roce_v2_gid_index"] = gid->index;
    port["roce_v2_address"] = gid->address();
    r.add("roce-gid", Verdict::ok,
          fmt::format("{}: RoCE v2 GID index {} carries {} on {}", name, gid->index, gid->address(), gid->netdev));
    r.fingerprint["rdma.gid_index." + name] = std::to_string(gid->index);
    return;
  }
  bool v1_only = !p.gids.empty();
  for (const auto& e : p.gids) v1_only = v1_only && !e.roce_v2();
  r.add("roce-gid", Verdict::fail,
        fmt::format("{}: no RoCE v2 GID with a routable address{}", name, v1_only ? " (only RoCE v1 entries)" : ""),
        v1_only ? "enable RoCE v2 on the port (the NIC's RoCE mode, e.g. `cma_roce_mode -d DEV -p PORT -m 2`)"
                : fmt::format("give {} an IP address: a GID is made for each address of the interface",
                              p.netdev.empty() ? "the port's interface" : p.netdev));
}

// Every port: a finding each, the facts, and what they add up to.
PortSummary check_ports(const ProbeContext& ctx, NodeReport& r) {
  PortSummary sum;
  nlohmann::json devices = nlohmann::json::array();
  for (const RdmaDevice& d : ctx.rdma) {
    nlohmann::json ports = nlohmann::json::array();
    for (const RdmaPort& p : d.ports) {
      const std::string name = fmt::format("{}:{}", d.name, p.number);
      nlohmann::json port = {{"port", p.number},           {"state", p.state}, {"phys_state", p.phys_state},
                             {"link_layer", p.link_layer}, {"rate", p.rate},   {"netdev", p.netdev},
                             {"netdev_mtu", p.netdev_mtu}};
      if (!p.active()) {
        sum.down.push_back(name);
      } else if (!p.roce()) {
        sum.active.push_back(name);
        if (!d.software) sum.active_hardware.push_back(name);
        r.add("rdma", Verdict::ok, fmt::format("{}: ACTIVE, InfiniBand, {}", name, p.rate));
      } else {
        sum.active.push_back(name);
        if (!d.software) sum.active_hardware.push_back(name);
        r.add("rdma", Verdict::ok,
              fmt::format("{}: ACTIVE, RoCE on {} (interface MTU {}), {}{}", name, p.netdev.empty() ? "?" : p.netdev,
                          p.netdev_mtu, p.rate.empty() ? "rate unknown" : p.rate,
                          d.software ? ", Soft-RoCE (rxe): RDMA done by the CPU" : ""));
        check_roce_port(p, name, port, sum, r);
      }
      ports.push_back(port);
    }
    devices.push_back({{"name", d.name},
                       {"software", d.software},
                       {"pci_path", d.pci_path},
                       {"numa_node", d.numa_node},
                       {"ports", ports}});
  }
  r.facts["rdma"] = devices;
  r.fingerprint["rdma.active_ports"] = join(sum.active);
  for (const std::string& name : sum.down)
    r.add("rdma", sum.active.empty() ? Verdict::fail : Verdict::warn, fmt::format("{} is not ACTIVE", name),
          "check the link (`ibstat`, `ip link`, the switch port); NCCL and UCX skip a port that is down");
  if (ctx.rdma.empty())
    r.add("rdma", Verdict::ok, "no RDMA devices: MPI and NCCL use TCP sockets",
          "on a RoCE or InfiniBand node, load the NIC's RDMA driver (mlx5_ib, ...) and rdma-core");
  return sum;
}

// What NCCL and UCX should use.
void recommend_environment(const ProbeContext& ctx, const PortSummary& sum, NodeReport& r) {
  if (!sum.active.empty()) {
    r.recommend("NCCL_IB_HCA", fmt::format("={}", join(sum.active)));  // '=': exact names, not prefixes
    r.recommend("UCX_NET_DEVICES", join(sum.active));
  }
  if (sum.gid_indexes.size() == 1) {
    r.recommend("NCCL_IB_GID_INDEX", std::to_string(*sum.gid_indexes.begin()));
  } else if (sum.gid_indexes.size() > 1) {
    r.add("roce-gid", Verdict::warn, "the RoCE ports' v2 GIDs sit at different indexes on this node",
          "NCCL_IB_GID_INDEX takes one index: leave it unset (NCCL picks the IPv4 RoCE v2 entry per port)");
  }
  const std::string socket_if = !sum.roce_netdev.empty() ? sum.roce_netdev : default_route_interface(ctx.sys);
  if (!socket_if.empty()) r.recommend("NCCL_SOCKET_IFNAME", socket_if);
  bool software = false;
  for (const auto& d : ctx.rdma) software = software || d.software;
  if (software && !sum.active.empty())
    r.recommend("UCX_UD_VERBS_ETH_DGID_CHECK", "n");  // UCX's UD transport drops every packet on rxe otherwise
}

// The job's own settings against what is there.
void check_job_settings(const ProbeContext& ctx, const PortSummary& sum, NodeReport& r) {
  const std::string hca = ctx.env_or("NCCL_IB_HCA");
  if (!hca.empty() && hca[0] != '^') {  // '^' excludes: naming an absent device there is harmless
    for (const std::string& want : split(hca[0] == '=' ? hca.substr(1) : hca, ',')) {
      const std::string dev = want.substr(0, want.find(':'));
      bool found = false;
      for (const auto& d : ctx.rdma) found = found || d.name.compare(0, dev.size(), dev) == 0;
      if (!found)
        r.add("nccl-env", Verdict::fail,
              fmt::format("NCCL_IB_HCA={} names {}, which this node does not have", hca, dev),
              sum.active.empty() ? "unset NCCL_IB_HCA (no RDMA here)"
                                 : fmt::format("set NCCL_IB_HCA=={}", join(sum.active)));
    }
  }
  const std::string gid_env = ctx.env_or("NCCL_IB_GID_INDEX");
  if (!gid_env.empty() && sum.gid_indexes.size() == 1 && gid_env != std::to_string(*sum.gid_indexes.begin()))
    r.add("nccl-env", Verdict::fail,
          fmt::format("NCCL_IB_GID_INDEX={} is not the RoCE v2 entry with this node's address (index {})", gid_env,
                      *sum.gid_indexes.begin()),
          fmt::format("set NCCL_IB_GID_INDEX={}", *sum.gid_indexes.begin()));
  if (ctx.env_or("NCCL_IB_DISABLE") == "1" && !sum.active_hardware.empty())
    r.add("nccl-env", Verdict::warn, "NCCL_IB_DISABLE=1 while RDMA ports are up: NCCL uses TCP sockets",
          "unset NCCL_IB_DISABLE");
  const std::string ucx_dev = ctx.env_or("UCX_NET_DEVICES");
  if (ucx_dev.empty() || ucx_dev == "all") return;
  for (const std::string& want : split(ucx_dev, ',')) {
    const std::string dev = want.substr(0, want.find(':'));
    bool found = ctx.sys.exists("/sys/class/net/" + dev);
    for (const auto& d : ctx.rdma) found = found || d.name == dev;
    if (!found)
      r.add("ucx-env", Verdict::fail,
            fmt::format("UCX_NET_DEVICES={} names {}, which this node does not have", ucx_dev, dev),
            sum.active.empty() ? "unset UCX_NET_DEVICES" : fmt::format("set UCX_NET_DEVICES={}", join(sum.active)));
  }
}

}  // namespace

void check_rdma(const ProbeContext& ctx, NodeReport& r) {
  const PortSummary sum = check_ports(ctx, r);
  recommend_environment(ctx, sum, r);
  check_job_settings(ctx, sum, r);
}

}  // namespace shardtrain::doctor
