// shardtrain plan CONFIG --ranks N [--json]: the peak bytes per rank of every
// strategy, before any job runs (runtime/train/memory_plan.h).
#include "cli/command.h"
#include "runtime/train/memory_plan.h"

namespace shardtrain::cli {

void add_plan_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string path;
    std::vector<std::string> overrides;
    int ranks = 1;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("plan", "Predict the peak memory per rank of a config for every strategy");
  cmd->add_option("config", a->path, "TOML config")->required();
  cmd->add_option("--set", a->overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  cmd->add_option("--ranks", a->ranks, "Ranks of the job")->required()->check(CLI::Range(1, kMaxCount));
  cmd->add_flag("--json", a->json, "Print JSON (one object per strategy)");
  out.push_back({cmd, [a](Process&) { return train::plan_command(a->path, a->overrides, a->ranks, a->json); }});
}

}  // namespace shardtrain::cli
