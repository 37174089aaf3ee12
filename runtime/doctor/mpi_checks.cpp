// MPI: which library, whether Open MPI's configuration lets UCX (and so
// RDMA) carry MPI's traffic, whether UCX sees the RDMA ports, and whether MPI
// takes GPU buffers (CUDA-aware) or shardtrain stages them through host memory.
#include "runtime/comm/transport/mpi_env.h"
#include "runtime/doctor/checks.h"
#include "runtime/doctor/doctor.h"
#include "runtime/doctor/open_mpi_params.h"

#include <fmt/format.h>
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support
#endif

#include <cstdio>

namespace shardtrain::doctor {
namespace {

// stdout of `command` (stderr dropped); nullopt when it did not exit 0.
std::optional<std::string> run_capture(const std::string& command) {
  // NOLINTNEXTLINE(bugprone-command-processor): fixed commands of this file, no input in them
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  for (size_t n = 0; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  return ::pclose(pipe) == 0 ? std::optional(out) : std::nullopt;
}

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

}  // namespace

void check_mpi(const ProbeContext& ctx, NodeReport& r) {
  if (ctx.live && mpi_running()) r.facts["mpi_library"] = comm::MpiEnv::library_version();
  const auto pml = open_mpi_param(ctx.sys, ctx.env, "pml");
  const auto btl = open_mpi_param(ctx.sys, ctx.env, "btl");
  r.facts["open_mpi"] = {{"pml", pml ? pml->value : ""},
                         {"pml_source", pml ? pml->source : ""},
                         {"btl", btl ? btl->value : ""},
                         {"btl_source", btl ? btl->source : ""}};
  r.fingerprint["mpi.pml"] = pml ? pml->value : "";
  r.facts["ucx_env"] = {{"UCX_NET_DEVICES", ctx.env_or("UCX_NET_DEVICES")}, {"UCX_TLS", ctx.env_or("UCX_TLS")}};
  const bool ucx_ruled_out = pml && mca_list_excludes(pml->value, "ucx");
  if (!ctx.has_active_rdma()) {
    r.add("mpi-transport", Verdict::ok,
          fmt::format("MPI over TCP (no RDMA port up){}",
                      pml ? fmt::format("; pml = {} ({})", pml->value, pml->source) : ""));
  } else if (ucx_ruled_out) {
    r.add("mpi-transport", Verdict::warn,
          fmt::format("Open MPI's pml = {} ({}) rules out UCX: MPI's traffic (CPU collectives, MPI-IO, staged "
                      "GPU buffers) goes over TCP, not RDMA",
                      pml->value, pml->source),
          "set OMPI_MCA_pml=ucx (`shardrun --fabric roce` or `ib` does)");
    r.recommend("OMPI_MCA_pml", "ucx");
  } else {
    r.add("mpi-transport", Verdict::ok,
          fmt::format("Open MPI may use UCX over RDMA (pml = {})", pml ? pml->value : "default"));
    r.recommend("OMPI_MCA_pml", "ucx");
  }

  // Whether UCX itself reaches the RDMA ports (a missing verbs provider shows here).
  if (ctx.thorough && ctx.live && ctx.has_active_rdma()) {
    const auto out = run_capture("ucx_info -d");
    if (!out) {
      r.add("ucx", Verdict::warn, "ucx_info did not run: cannot tell whether UCX sees the RDMA ports",
            "install UCX's tools (Debian: ucx-utils) and run `ucx_info -d`");
    } else {
      nlohmann::json seen = nlohmann::json::array();
      std::string rdma_seen;
      for (const auto& [transport, device] : parse_ucx_devices(*out)) {
        seen.push_back({{"transport", transport}, {"device", device}});
        const std::string path = fmt::format("{}/{}", transport, device);
        for (const auto& d : ctx.rdma)
          if (device.rfind(d.name + ':', 0) == 0 && rdma_seen.find(path) == std::string::npos) {
            if (!rdma_seen.empty()) rdma_seen += ", ";
            rdma_seen += path;
          }
      }
      r.facts["ucx_devices"] = seen;
      if (rdma_seen.empty())
        r.add("ucx", Verdict::fail, "UCX lists no transport on the RDMA devices",
              "install rdma-core's verbs provider for the NIC (ibverbs-providers) and UCX's verbs module");
      else
        r.add("ucx", Verdict::ok, "UCX reaches " + rdma_seen);
    }
  }

  int cuda_aware = -1;  // -1: the MPI library cannot say
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  if (ctx.live && mpi_running()) cuda_aware = MPIX_Query_cuda_support();
#endif
  r.facts["mpi_cuda_aware"] = cuda_aware;
  if (ctx.gpu_count() > 0 && ctx.live)
    r.add("mpi-cuda", cuda_aware == 1 ? Verdict::ok : Verdict::warn,
          cuda_aware == 1 ? "MPI takes GPU buffers (CUDA-aware)"
                          : "MPI is not CUDA-aware: comm.backend = \"mpi\" stages GPU tensors through pinned host "
                            "memory",
          cuda_aware == 1 ? "" : "use comm.backend = \"nccl\" (the default on GPUs) for GPU collectives");
}

std::string mpi_transport(const nlohmann::json& facts) {
  const auto om = facts.value("open_mpi", nlohmann::json::object());
  const std::string pml = om.value("pml", "");
  if (pml == "ucx") {
    // Forced: MPI_Init fails rather than fall back when UCX cannot start.
    const auto ucx = facts.value("ucx_env", nlohmann::json::object());
    const std::string devices = ucx.value("UCX_NET_DEVICES", ""), tls = ucx.value("UCX_TLS", "");
    return fmt::format("UCX (pml = ucx){}{}", devices.empty() ? "" : " on " + devices,
                       tls.empty() ? "" : ", transports " + tls);
  }
  if (mca_list_excludes(pml, "ucx"))
    return fmt::format("ob1 over TCP or shared memory (pml = {}, {})", pml, om.value("pml_source", ""));
  return pml.empty() ? "Open MPI's choice (pml not set)" : fmt::format("Open MPI's choice among pml = {}", pml);
}

}  // namespace shardtrain::doctor
