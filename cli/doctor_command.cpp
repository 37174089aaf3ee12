// shardtrain doctor [--json] [--data PATH] [--quick] [--sysroot DIR]: what each
// node of the job offers it (RDMA, GPUs, GPU-NIC affinity, GPUDirect, MPI's
// transport, UCX, NCCL, the data's file system), judged, with the environment
// to use. Run it under the job's launcher (`shardrun -n N --ppn G -- shardtrain
// doctor`) to check every node; rank 0 prints. Exits 1 when a check fails.
#include "cli/command.h"
#include "runtime/core/error.h"
#include "runtime/doctor/doctor.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace shardtrain::cli {

void add_doctor_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    bool json = false;
    bool quick = false;
    bool local = false;
    std::string data;
    std::string sysroot = "/";
    std::string out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("doctor", "Check each node's fabric, GPUs, MPI and NCCL before a job");
  cmd->add_flag("--json", a->json, "Print JSON: every node's findings, recommended environment and facts");
  cmd->add_flag("--quick", a->quick, "Leave out what takes seconds (ucx_info), as a job's start-up check does");
  cmd->add_flag("--local", a->local,
                "This node alone, without MPI (what `shardrun --fabric` runs before it launches the job)");
  cmd->add_option("--data", a->data, "The job's data directory: its file system and size against memory");
  cmd->add_option("--sysroot", a->sysroot,
                  "Read /sys and /proc under this directory instead (a saved or fixture tree; MPI, CUDA and NCCL "
                  "are then not asked)");
  cmd->add_option("--out", a->out, "Also write the JSON report to this file (rank 0)");
  out.push_back({cmd, [a](Process& p) {
                   ST_CHECK(std::filesystem::is_directory(a->sysroot), "doctor: --sysroot {} is not a directory",
                            a->sysroot);
                   if (!a->local) p.mpi();
                   doctor::ProbeOptions options;
                   options.sysroot = a->sysroot;
                   options.data_path = a->data;
                   options.thorough = !a->quick;
                   const auto mine = doctor::probe_node(options, doctor::process_environment(), p.rank());
                   const auto all = a->local ? std::vector{mine} : doctor::gather_reports(mine, MPI_COMM_WORLD);
                   int worst = 0;
                   if (p.rank() == 0) {
                     const auto report = doctor::combine(all);
                     const auto json = doctor::to_json(report);
                     if (a->json)
                       fmt::print("{}\n", json.dump(2));
                     else
                       fmt::print("{}", doctor::render_text(report));
                     if (!a->out.empty()) {
                       std::ofstream f(a->out);
                       f << json.dump(2) << "\n";
                       ST_CHECK(f.good(), "doctor: cannot write {}", a->out);
                     }
                     worst = report.worst() == doctor::Verdict::fail ? 1 : 0;
                   }
                   if (!a->local) MPI_Bcast(&worst, 1, MPI_INT, 0, MPI_COMM_WORLD);
                   return worst;
                 }});
}

}  // namespace shardtrain::cli
