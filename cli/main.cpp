// build/bin/shardtrain: the command-line front end. Each subcommand lives in
// its own file (cli/*_command.cpp) and adds itself here.
#include "cli/command.h"
#include "runtime/core/allocator.h"
#include "runtime/doctor/rank_binding.h"
#include "runtime/train/blas_core.h"
#include "runtime/train/fatal_error.h"

#include <exception>

using namespace shardtrain;

int main(int argc, char** argv) {
  keep_freed_host_memory();
  train::restart_with_a_better_blas_core(argv);
  CLI::App app{"shardtrain: distributed training over MPI (DDP, ZeRO-1, FSDP) with per-rank telemetry"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  std::vector<cli::Command> commands;
  for (auto add : {cli::add_train_command, cli::add_prep_commands, cli::add_bench_commands, cli::add_stage_command,
                   cli::add_upload_command, cli::add_ttt_command, cli::add_config_command, cli::add_info_command,
                   cli::add_plan_command, cli::add_report_command, cli::add_study_command, cli::add_doctor_command})
    add(app, commands);
  CLI11_PARSE(app, argc, argv);

  cli::Process process(argc, argv);
  try {
    doctor::bind_as_the_launcher_asks();  // before MPI, UCX and NCCL read the NIC they were given
    for (const cli::Command& c : commands)
      if (*c.app) return c.run(process);
  } catch (const std::exception& e) {
    train::report_fatal_error(e, process.rank(), process.world_size());
    return 1;
  }
  return 0;
}
