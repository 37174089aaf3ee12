// NCCL's INFO lines to a FabricReport. The formats (NCCL 2.4 - 2.28):
//   host:pid:tid [dev] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>
//   host:pid:tid [dev] NCCL INFO NET/IB : No device found.
//   host:pid:tid [dev] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:...
//   host:pid:tid [dev] NCCL INFO Using network IB             (or Socket, or a plugin's name)
//   host:pid:tid [dev] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)
//   host:pid:tid [dev] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0'
//   host:pid:tid [dev] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
//   host:pid:tid [dev] NCCL INFO Channel 00 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0
//   host:pid:tid [dev] NCCL INFO Channel 04/0 : 0[0] -> 7[7] via P2P/CUMEM   (P2P/IPC, P2P/direct pointer,
//   SHM/direct/direct) host:pid:tid [dev] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to 0 host:pid:tid [dev] NCCL
//   INFO cudaDriverVersion 13000 NCCL version 2.5.6+cuda10.0              (older: without the prefix; newer: "NCCL INFO
//   NCCL version ...") host:pid:tid [dev] NCCL INFO comm 0x55.. rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0
//   MNNVL 0 host:pid:tid [dev] NCCL INFO comm 0x55.. rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1c000 commId 0x.. -
//   Init COMPLETE host:pid:tid [dev] NCCL INFO ncclCommInitRank comm 0x55.. rank 0 nranks 1 cudaDev 0 ... - Init
//   COMPLETE  (2.28)
// (recorded on an H200 with NCCL 2.28.9 from PyTorch's wheel: tests/unit/telemetry_nccl_log_test.cpp)
#include "runtime/telemetry/nccl_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardtrain::telemetry {
namespace {

using uchar = unsigned char;

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

bool contains_nocase(std::string_view s, std::string_view what) {
  auto it = std::search(s.begin(), s.end(), what.begin(), what.end(),
                        [](char a, char b) { return std::tolower(uchar(a)) == std::tolower(uchar(b)); });
  return it != s.end();
}

// The whitespace-delimited word after `key` in `s`, or "".
std::string word_after(std::string_view s, std::string_view key) {
  size_t p = s.find(key);
  if (p == std::string_view::npos) return {};
  p += key.size();
  while (p < s.size() && s[p] == ' ') ++p;
  size_t e = p;
  while (e < s.size() && !std::isspace(uchar(s[e]))) ++e;
  return std::string(s.substr(p, e - p));
}

// The integer after `key` (" nNodes " -> 2), or -1.
int int_after(std::string_view s, std::string_view key) {
  const std::string w = word_after(s, key);
  if (w.empty() || !std::isdigit(uchar(w[0]))) return -1;
  int value = -1;
  const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), value);
  return ec == std::errc() ? value : -1;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// "[0]mlx5_0:1/RoCE [1]mlx5_1:1/IB [RO]; OOB ..." -> {"mlx5_0:1/RoCE", "mlx5_1:1/IB"}
// "[0]eth0:10.0.0.1<0> [1]eth1:..." -> {"eth0", "eth1"} (with strip_address)
std::vector<std::string> bracketed_devices(std::string_view list, bool strip_address) {
  std::vector<std::string> out;
  const size_t end = list.find(';');
  if (end != std::string_view::npos) list = list.substr(0, end);  // before "; OOB ..."
  size_t p = 0;
  while ((p = list.find('[', p)) != std::string_view::npos) {
    size_t q = list.find(']', p);
    if (q == std::string_view::npos) break;
    const std::string_view index = list.substr(p + 1, q - p - 1);
    p = q + 1;
    if (index.empty() || !std::all_of(index.begin(), index.end(), [](char c) { return std::isdigit(uchar(c)); }))
      continue;  // "[RO]", "[GDR]"
    size_t e = p;
    while (e < list.size() && !std::isspace(uchar(list[e])) && list[e] != '[') ++e;
    std::string dev(list.substr(p, e - p));
    if (strip_address) dev = dev.substr(0, dev.find(':'));
    if (!dev.empty()) out.push_back(dev);
    p = e;
  }
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "mlx5_0:1/RoCE" -> "mlx5_0"
std::string hca_name(const std::string& dev) { return dev.substr(0, dev.find(':')); }

struct Parser {
  FabricReport r;
  std::string network;  // "Using network X"
  std::vector<std::string> socket_ifaces;
  bool ib_links = false, roce_links = false, ib_absent = false, ib_disabled_env = false;
  int gdr_enabled = 0, gdr_disabled = 0;
  bool gdr_level_zero = false;
  int channels_net_socket = 0, channels_net_ib = 0;
  std::string other_net;  // a NET plugin other than IB and Socket seen on a channel

  void line(std::string_view l) {
    if (const size_t p = l.find("NCCL version "); p != std::string_view::npos) {
      if (r.nccl_version.empty()) r.nccl_version = word_after(l.substr(p), "NCCL version ");
      return;
    }
    const size_t info = l.find("NCCL INFO ");
    if (info == std::string_view::npos) return;
    const std::string_view m = l.substr(info + 10);

    if (m.starts_with("cudaDriverVersion")) {
      r.cuda_driver_version = std::max(0, int_after(m, "cudaDriverVersion"));
    } else if (m.starts_with("NET/IB")) {
      if (contains(m, "GPU Direct RDMA")) {
        if (contains_nocase(m, "disabled"))
          ++gdr_disabled;
        else if (contains_nocase(m, "enable"))
          ++gdr_enabled;
      } else if (contains(m, ": Using ")) {
        for (const auto& dev : bracketed_devices(m.substr(m.find(": Using ") + 8), false)) {
          add_unique(r.ib_devices, dev);
          if (dev.ends_with("/RoCE"))
            roce_links = true;
          else
            ib_links = true;
        }
      } else if (contains(m, "No device found")) {
        ib_absent = true;
      }
    } else if (m.starts_with("NET/Socket") && contains(m, ": Using ")) {
      for (const auto& dev : bracketed_devices(m.substr(m.find(": Using ") + 8), true)) add_unique(socket_ifaces, dev);
    } else if (m.starts_with("Using network ")) {
      network = std::string(m.substr(14));
      while (!network.empty() && std::isspace(uchar(network.back()))) network.pop_back();
    } else if (m.starts_with("Channel ") && contains(m, " via ")) {
      const std::string via = word_after(m, " via ");
      if (via.starts_with("NET/")) {
        ++r.channels_net;
        if (contains(via, "GDRDMA")) ++r.channels_net_gdr;
        const std::string kind = via.substr(4, via.find('/', 4) - 4);
        if (kind == "IB")
          ++channels_net_ib;
        else if (kind == "Socket")
          ++channels_net_socket;
        else
          other_net = kind;
      } else if (via.starts_with("P2P")) {
        ++r.channels_p2p;
      } else if (via.starts_with("SHM")) {
        ++r.channels_shm;
      }
    } else if (contains(m, "set by environment to")) {
      add_unique(r.settings, std::string(m));
      if (m.starts_with("NCCL_NET_GDR_LEVEL") || m.starts_with("NCCL_IB_GDR_LEVEL")) {
        const std::string v = word_after(m, "set by environment to");
        gdr_level_zero = v == "0" || v == "0." || v == "LOC" || v == "LOC.";
      }
      if (m.starts_with("NCCL_IB_DISABLE")) {
        const std::string v = word_after(m, "set by environment to");
        ib_disabled_env = !v.empty() && v[0] == '1';
      }
    }
    // "comm 0x.. rank 0 nRanks 2 nNodes 2 ...", "[ncclCommInitRank|ncclCommSplit] comm 0x.. rank 0 nranks 2 ... - Init
    // COMPLETE"
    if (m.starts_with("comm ") || contains(m, " comm 0x")) {
      if (int n = int_after(m, " nNodes "); n > 0) r.nodes = std::max(r.nodes, n);
      int n = int_after(m, " nRanks ");
      if (n < 0) n = int_after(m, " nranks ");
      if (n > 0) r.ranks = std::max(r.ranks, n);
      if (contains(m, "Init COMPLETE")) r.init_complete = true;
    }
  }

  std::string ib_kind() const { return roce_links && !ib_links ? "RoCE" : "IB"; }

  FabricReport finish() {
    // The transport: what the channels actually use; without channel lines,
    // what NCCL announced.
    if (r.channels_net > 0) {
      if (channels_net_ib >= channels_net_socket && channels_net_ib > 0)
        r.transport = ib_kind();
      else if (channels_net_socket > 0)
        r.transport = "Socket";
      else
        r.transport = other_net;
    } else if (r.channels_p2p + r.channels_shm > 0 || r.nodes == 1) {
      r.transport = "P2P/SHM only";
    } else if (network == "IB") {
      r.transport = ib_kind();
    } else if (network == "Socket") {
      r.transport = "Socket";
    } else if (!network.empty()) {
      r.transport = network;
    }

    const bool rdma = r.transport == "IB" || r.transport == "RoCE";
    if (rdma) {
      r.devices = r.ib_devices;
      if (r.channels_net > 0)
        r.gpudirect_rdma = r.channels_net_gdr > 0;
      else if (gdr_enabled > 0 && !gdr_level_zero)
        r.gpudirect_rdma = true;
      else if (gdr_disabled > 0 || gdr_level_zero)
        r.gpudirect_rdma = false;
    } else if (r.transport == "Socket") {
      r.devices = socket_ifaces;
      r.gpudirect_rdma = false;  // sockets always copy through host memory
    }

    // Warnings.
    std::vector<std::string> hcas;
    for (const auto& d : r.ib_devices) add_unique(hcas, hca_name(d));
    if (rdma && r.gpudirect_rdma == false) {
      std::string why = gdr_level_zero     ? " (NCCL_NET_GDR_LEVEL disables it)"
                        : gdr_disabled > 0 ? " (NCCL: \"GPU Direct RDMA Disabled\" for the HCAs: no nvidia-peermem "
                                             "module and no DMA-BUF support, or the GPU and the NIC too far apart)"
                                           : "";
      r.warnings.push_back(
          fmt::format("{}{} runs without GPUDirect RDMA: every transfer is staged through host memory{}", r.transport,
                      hcas.empty() ? "" : fmt::format(" ({})", join(hcas)), why));
    } else if (rdma && r.channels_net > 0 && r.channels_net_gdr < r.channels_net) {
      r.warnings.push_back(
          fmt::format("only {} of {} network channel connections use GPUDirect RDMA: the others "
                      "are staged through host memory",
                      r.channels_net_gdr, r.channels_net));
    }
    if (r.transport == "Socket" && !r.ib_devices.empty()) {
      r.warnings.push_back(fmt::format(
          "NCCL falls back to TCP sockets although {} devices exist ({}){}: check NCCL_IB_DISABLE, NCCL_IB_HCA, "
          "NCCL_NET and the verbs libraries",
          ib_kind(), join(hcas), ib_disabled_env ? " (NCCL_IB_DISABLE=1 is set)" : ""));
    }
    if (r.transport == "Socket" && (r.channels_net > 0 || r.nodes > 1)) {
      r.warnings.push_back(
          fmt::format("NCCL moves data between nodes over TCP sockets{}: expect a small fraction "
                      "of an RDMA fabric's bandwidth, with every transfer through host memory",
                      socket_ifaces.empty() ? "" : fmt::format(" ({})", join(socket_ifaces))));
    }
    if (r.transport == "unknown" && (!network.empty() || !r.nccl_version.empty()))
      r.warnings.push_back(
          "the NCCL log does not say which transport the channels use (set "
          "NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH)");
    return std::move(r);
  }
};

}  // namespace

FabricReport parse_nccl_log(std::string_view text) {
  Parser p;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(start, end - start);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    p.line(l);
    start = end + 1;
  }
  return p.finish();
}

FabricReport read_nccl_logs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) files.push_back(it->path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    text += ss.str();
    text += '\n';
  }
  return parse_nccl_log(text);
}

std::string fabric_summary_text(const FabricReport& r) {
  std::string s = fmt::format("NCCL{}: {}", r.nccl_version.empty() ? "" : " " + r.nccl_version, r.transport);
  if (!r.devices.empty()) {
    std::vector<std::string> names;
    for (const auto& d : r.devices) add_unique(names, hca_name(d));
    s += fmt::format(" ({})", join(names));
  }
  if (r.gpudirect_rdma) s += fmt::format(", GPUDirect RDMA {}", *r.gpudirect_rdma ? "on" : "off");
  if (r.channels_net + r.channels_p2p + r.channels_shm > 0)
    s += fmt::format("; channel connections: {} via NET ({} GDRDMA), {} via P2P, {} via SHM", r.channels_net,
                     r.channels_net_gdr, r.channels_p2p, r.channels_shm);
  if (r.nodes > 0) s += fmt::format("; {} node{}", r.nodes, r.nodes == 1 ? "" : "s");
  if (r.ranks > 0) s += fmt::format(", {} ranks", r.ranks);
  s += '\n';
  for (const auto& w : r.warnings) s += "warning: " + w + '\n';
  return s;
}

nlohmann::json fabric_json(const FabricReport& r) {
  nlohmann::json j = {
      {"nccl_version", r.nccl_version},
      {"cuda_driver_version", r.cuda_driver_version},
      {"transport", r.transport},
      {"gpudirect_rdma", r.gpudirect_rdma ? nlohmann::json(*r.gpudirect_rdma) : nlohmann::json(nullptr)},
      {"devices", r.devices},
      {"ib_devices", r.ib_devices},
      {"channels",
       {{"net", r.channels_net}, {"net_gdr", r.channels_net_gdr}, {"p2p", r.channels_p2p}, {"shm", r.channels_shm}}},
      {"nodes", r.nodes},
      {"ranks", r.ranks},
      {"init_complete", r.init_complete},
      {"settings", r.settings},
      {"warnings", r.warnings},
  };
  return j;
}

std::vector<std::pair<std::string, std::string>> nccl_debug_environment(const std::string& dir, int rank) {
  std::vector<std::pair<std::string, std::string>> env;
  auto keep = [&](const char* name, std::string value) {
    const char* set = std::getenv(name);
    env.emplace_back(name, set && *set ? std::string(set) : std::move(value));
  };
  keep("NCCL_DEBUG", "INFO");
  keep("NCCL_DEBUG_SUBSYS", "INIT,NET,GRAPH");
  // NCCL expands %h (host) and %p (pid) in the file name.
  keep("NCCL_DEBUG_FILE", fmt::format("{}/rank-{}.%h.%p.log", dir, rank));
  return env;
}

void set_nccl_debug_environment(const std::string& dir, int rank) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& [name, value] : nccl_debug_environment(dir, rank)) ::setenv(name.c_str(), value.c_str(), 1);
}

}  // namespace shardtrain::telemetry
