// The node's RDMA devices and ports as the kernel describes them in sysfs
// (/sys/class/infiniband): state, link layer, rate, the GID table with each
// entry's RoCE version and interface, the PCI function behind the device.
// Read without libibverbs, so a node without rdma-core is still described.
#pragma once

#include "runtime/doctor/sys_root.h"

#include <optional>
#include <string>
#include <vector>

namespace shardtrain::doctor {

struct GidEntry {
  int index = 0;
  std::string gid;     // as sysfs writes it: eight groups of four hex digits
  std::string type;    // "RoCE v2", "IB/RoCE v1"; empty on InfiniBand kernels that do not say
  std::string netdev;  // the interface the entry belongs to (RoCE); empty on InfiniBand
  bool roce_v2() const { return type == "RoCE v2"; }
  bool ipv4_mapped() const;  // ::ffff:a.b.c.d
  bool link_local() const;   // fe80::/10
  // "10.0.0.1" for an IPv4-mapped entry, the IPv6 text otherwise.
  std::string address() const;
};

struct RdmaPort {
  int number = 0;
  std::string state;           // "ACTIVE", "DOWN", "INIT", ...
  std::string phys_state;      // "LinkUp", "Disabled", "Polling", ...
  std::string link_layer;      // "Ethernet" (RoCE) or "InfiniBand"
  std::string rate;            // "100 Gb/sec (4X EDR)"
  std::string netdev;          // RoCE: the interface under the port
  int netdev_mtu = 0;          // its MTU; 0 when unknown
  std::vector<GidEntry> gids;  // entries in use (all-zero entries left out)

  bool active() const { return state == "ACTIVE"; }
  bool roce() const { return link_layer == "Ethernet"; }
  // The RoCE path MTU the port runs at: the largest InfiniBand MTU (256 to
  // 4096) that fits the interface's MTU less the RoCE v2 headers, as the
  // kernel computes it; 0 when the interface's MTU is unknown or on InfiniBand.
  int roce_active_mtu() const;
};

struct RdmaDevice {
  std::string name;       // "mlx5_0", "rxe0"
  bool software = false;  // Soft-RoCE (rxe) or soft iWARP (siw): no PCI function of its own
  std::string pci_path;   // the PCI function, links followed ("/sys/devices/pci0000:00/.../0000:3b:00.0")
  int numa_node = -1;     // -1: unknown (one-socket machines, VMs)
  std::vector<RdmaPort> ports;

  bool any_port_active() const {
    for (const RdmaPort& p : ports)
      if (p.active()) return true;
    return false;
  }
};

std::vector<RdmaDevice> scan_rdma_devices(const SysRoot& sys);

// The GID entry a RoCE job should use on this port, as NCCL and UCX choose
// by default: RoCE v2 carrying an IPv4 address, else RoCE v2 with a routable
// IPv6 address; nullopt when the port has neither.
std::optional<GidEntry> routable_roce_v2_gid(const RdmaPort& port);

// The InfiniBand MTU (bytes) a RoCE port runs at on an interface of `mtu` bytes.
int roce_mtu_for_interface_mtu(int mtu);

}  // namespace shardtrain::doctor
