#include "runtime/doctor/rdma_ports.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace shardtrain::doctor {
namespace {

// "4: ACTIVE" -> "ACTIVE" (sysfs prefixes the enum's number).
std::string after_colon(const std::optional<std::string>& s) {
  if (!s) return "";
  const size_t colon = s->find(':');
  if (colon == std::string::npos) return *s;
  size_t start = colon + 1;
  while (start < s->size() && (*s)[start] == ' ') ++start;
  return s->substr(start);
}

int to_int(const std::optional<std::string>& s, int fallback) {
  if (!s) return fallback;
  int v = 0;
  const auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  return ec == std::errc() && end == s->data() + s->size() ? v : fallback;
}

// 16 bytes from "fe80:0000:...:3456"; nullopt for anything else.
std::optional<std::array<unsigned char, 16>> gid_bytes(const std::string& gid) {
  std::string hex;
  for (char c : gid)
    if (c != ':') hex += c;
  if (hex.size() != 32) return std::nullopt;
  std::array<unsigned char, 16> b{};
  for (size_t i = 0; i < 16; ++i) {
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, v, 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return std::nullopt;
    b[i] = static_cast<unsigned char>(v);
  }
  return b;
}

bool all_zero(const std::string& gid) {
  for (char c : gid)
    if (c != '0' && c != ':') return false;
  return true;
}

RdmaPort scan_port(const SysRoot& sys, const std::string& dev_dir, const std::string& number,
                   const std::string& parent_netdev) {
  const std::string dir = dev_dir + "/ports/" + number;
  RdmaPort p;
  p.number = to_int(number, 0);
  p.state = after_colon(sys.read(dir + "/state"));
  p.phys_state = after_colon(sys.read(dir + "/phys_state"));
  p.link_layer = sys.read(dir + "/link_layer").value_or("");
  p.rate = sys.read(dir + "/rate").value_or("");
  for (const std::string& idx : sys.list(dir + "/gids")) {
    const auto gid = sys.read(fmt::format("{}/gids/{}", dir, idx));
    if (!gid || all_zero(*gid)) continue;
    GidEntry e;
    e.index = to_int(idx, -1);
    e.gid = *gid;
    e.type = sys.read(fmt::format("{}/gid_attrs/types/{}", dir, idx)).value_or("");
    e.netdev = sys.read(fmt::format("{}/gid_attrs/ndevs/{}", dir, idx)).value_or("");
    p.gids.push_back(e);
  }
  std::sort(p.gids.begin(), p.gids.end(), [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  if (p.roce()) {
    for (const GidEntry& e : p.gids)
      if (!e.netdev.empty()) {
        p.netdev = e.netdev;
        break;
      }
    if (p.netdev.empty()) p.netdev = parent_netdev;
    if (p.netdev.empty()) {  // the PCI function's own interface
      const auto nets = sys.list(dev_dir + "/device/net");
      if (!nets.empty()) p.netdev = nets.front();
    }
    if (!p.netdev.empty()) p.netdev_mtu = to_int(sys.read("/sys/class/net/" + p.netdev + "/mtu"), 0);
  }
  return p;
}

}  // namespace

bool GidEntry::ipv4_mapped() const {
  const auto b = gid_bytes(gid);
  if (!b) return false;
  for (int i = 0; i < 10; ++i)
    if ((*b)[i] != 0) return false;
  return (*b)[10] == 0xff && (*b)[11] == 0xff;
}

bool GidEntry::link_local() const {
  const auto b = gid_bytes(gid);
  return b && (*b)[0] == 0xfe && ((*b)[1] & 0xc0) == 0x80;
}

std::string GidEntry::address() const {
  const auto b = gid_bytes(gid);
  if (!b) return gid;
  char text[INET6_ADDRSTRLEN] = {};
  if (ipv4_mapped()) {
    inet_ntop(AF_INET, b->data() + 12, text, sizeof text);
  } else {
    inet_ntop(AF_INET6, b->data(), text, sizeof text);
  }
  return text;
}

int RdmaPort::roce_active_mtu() const { return roce() && netdev_mtu > 0 ? roce_mtu_for_interface_mtu(netdev_mtu) : 0; }

int roce_mtu_for_interface_mtu(int mtu) {
  // RoCE v2 headers the kernel takes off the interface MTU: GRH 40, UDP 8,
  // BTH 12, XRC 4, AtomicETH 28, ICRC 4 (include/rdma/ib_addr.h, iboe_get_mtu).
  const int payload = mtu - (40 + 8 + 12 + 4 + 28 + 4);
  for (int ib : {4096, 2048, 1024, 512, 256})
    if (payload >= ib) return ib;
  return 0;
}

std::optional<GidEntry> routable_roce_v2_gid(const RdmaPort& port) {
  const GidEntry* ipv6 = nullptr;
  for (const GidEntry& e : port.gids) {
    if (!e.roce_v2()) continue;
    if (e.ipv4_mapped()) return e;
    if (!e.link_local() && ipv6 == nullptr) ipv6 = &e;
  }
  if (ipv6 != nullptr) return *ipv6;
  return std::nullopt;
}

std::vector<RdmaDevice> scan_rdma_devices(const SysRoot& sys) {
  std::vector<RdmaDevice> out;
  for (const std::string& name : sys.list("/sys/class/infiniband")) {
    const std::string dir = "/sys/class/infiniband/" + name;
    RdmaDevice d;
    d.name = name;
    // Soft-RoCE and soft iWARP name the interface they run on in `parent`
    // and have no PCI function of their own.
    const auto parent = sys.read(dir + "/parent");
    d.software = parent.has_value() && !sys.exists(dir + "/device");
    if (const auto pci = sys.resolve(dir + "/device")) {
      d.pci_path = *pci;
      d.numa_node = to_int(sys.read(dir + "/device/numa_node"), -1);
    }
    for (const std::string& port : sys.list(dir + "/ports"))
      d.ports.push_back(scan_port(sys, dir, port, parent.value_or("")));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace shardtrain::doctor
