// Fixture node trees for the doctor's tests: a temporary directory laid out
// like / (sys/class/infiniband, sys/devices/pci..., proc), written the way the
// kernel presents them, so the probes read it as they read a real node.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace shardtrain::doctor::testing {

namespace fs = std::filesystem;

struct Gid {
  std::string gid;   // eight groups of four hex digits
  std::string type;  // "RoCE v2", "IB/RoCE v1", "" (InfiniBand: no types file)
  std::string netdev;
};

// GIDs sysfs shows for an interface with one IPv4 address: link-local v1 and
// v2, then the IPv4-mapped address as v1 and v2 (indexes 0-3).
inline std::vector<Gid> ipv4_gids(const std::string& netdev, const std::string& mapped_tail = "0a00:0001") {
  return {{"fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1", netdev},
          {"fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2", netdev},
          {"0000:0000:0000:0000:0000:ffff:" + mapped_tail, "IB/RoCE v1", netdev},
          {"0000:0000:0000:0000:0000:ffff:" + mapped_tail, "RoCE v2", netdev}};
}

class FixtureRoot {
 public:
  explicit FixtureRoot(const std::string& host = "node0") {
    root_ = fs::temp_directory_path() / ("doctor-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(root_);
    fs::create_directories(root_);
    write("/proc/sys/kernel/hostname", host + "\n");
    write("/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
    write("/proc/meminfo", "MemTotal:       16000000 kB\nMemFree:        1000 kB\n");
    write("/proc/net/route",
          "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
          "eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n");
    fs::create_directories(root_ / "sys/class/net/eth0");
  }
  ~FixtureRoot() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FixtureRoot(const FixtureRoot&) = delete;
  FixtureRoot& operator=(const FixtureRoot&) = delete;

  std::string path() const { return root_.string(); }

  void write(const std::string& path, const std::string& text) const {
    const fs::path p = root_ / path.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // A link at `path` to `target`, relative as sysfs makes them.
  void link(const std::string& path, const std::string& target) const {
    const fs::path p = root_ / path.substr(1);
    fs::create_directories(p.parent_path());
    fs::create_symlink(fs::relative(root_ / target.substr(1), p.parent_path()), p);
  }

  // A PCI function at /sys/devices/<pci_path> with its /sys/bus/pci/devices link.
  void pci_function(const std::string& pci_path, const std::string& vendor, const std::string& cls, int numa) const {
    const std::string dir = "/sys/devices/" + pci_path;
    write(dir + "/vendor", vendor + "\n");
    write(dir + "/class", cls + "\n");
    write(dir + "/numa_node", std::to_string(numa) + "\n");
    link("/sys/bus/pci/devices/" + fs::path(pci_path).filename().string(), dir);
  }
  void gpu(const std::string& pci_path, int numa) const { pci_function(pci_path, "0x10de", "0x030200", numa); }

  // An RDMA device on a PCI function (pci_path empty: a software device on `parent`).
  void rdma_device(const std::string& name, const std::string& pci_path, int numa,
                   const std::string& parent = {}) const {
    const std::string dir = "/sys/class/infiniband/" + name;
    if (!pci_path.empty()) {
      pci_function(pci_path, "0x15b3", "0x020000", numa);
      link(dir + "/device", "/sys/devices/" + pci_path);
    }
    if (!parent.empty()) write(dir + "/parent", parent + "\n");
    write(dir + "/node_type", "1: CA\n");
  }
  void port(const std::string& dev, int number, const std::string& state, const std::string& link_layer,
            const std::vector<Gid>& gids, const std::string& rate = "100 Gb/sec (4X EDR)") const {
    const std::string dir = "/sys/class/infiniband/" + dev + "/ports/" + std::to_string(number);
    write(dir + "/state", state + "\n");
    write(dir + "/phys_state", state == "4: ACTIVE" ? "5: LinkUp\n" : "3: Disabled\n");
    write(dir + "/link_layer", link_layer + "\n");
    write(dir + "/rate", rate + "\n");
    for (size_t i = 0; i < 8; ++i) {  // the kernel lists unused entries too, as zeros
      const std::string idx = std::to_string(i);
      write(dir + "/gids/" + idx, i < gids.size() ? gids[i].gid + "\n" : "0000:0000:0000:0000:0000:0000:0000:0000\n");
      if (i < gids.size() && !gids[i].type.empty()) {
        write(dir + "/gid_attrs/types/" + idx, gids[i].type + "\n");
        write(dir + "/gid_attrs/ndevs/" + idx, gids[i].netdev + "\n");
      }
    }
  }
  void netdev(const std::string& name, int mtu) const {
    write("/sys/class/net/" + name + "/mtu", std::to_string(mtu) + "\n");
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  fs::path root_;
};

}  // namespace shardtrain::doctor::testing
