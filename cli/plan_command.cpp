// shardtrain plan CONFIG --ranks N [--ranks-per-node G] [--json]
// [--sample-shape S --classes V]: the peak bytes per rank of every
// strategy, before any job runs (runtime/train/memory_plan.h).
#include "cli/command.h"
#include "runtime/train/memory_plan.h"

namespace shardtrain::cli {

void add_plan_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string path;
    std::vector<std::string> overrides;
    int ranks = 1;
    int ranks_per_node = 0;
    bool json = false;
    train::PlanDataOverride data;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("plan", "Predict the peak memory per rank of a config for every strategy");
  cmd->add_option("config", a->path, "TOML config")->required();
  cmd->add_option("--set", a->overrides, "Override a config key (repeatable)")->allow_extra_args(false);
  cmd->add_option("--ranks", a->ranks, "Ranks of the job")->required()->check(CLI::Range(1, kMaxCount));
  cmd->add_option("--ranks-per-node", a->ranks_per_node,
                  "Ranks per node (comm.ranks_per_node): adds FSDP's HYBRID (sharded within a node) to the table")
      ->check(CLI::Range(1, kMaxCount));
  cmd->add_flag("--json", a->json, "Print JSON (one object per strategy, with the Blocks and the step's collectives)");
  CLI::Option* shape = cmd->add_option("--sample-shape", a->data.sample_shape,
                                       "Plan for data not at hand: one sample's shape (1x28x28; a language model: T)");
  cmd->add_option("--classes", a->data.classes, "With --sample-shape: classes (a language model: the vocabulary)")
      ->needs(shape);
  cmd->add_option("--test-samples", a->data.test_samples, "With --sample-shape: samples of the test split")
      ->needs(shape);
  shape->needs("--classes");
  out.push_back({cmd, [a](Process&) {
                   std::vector<std::string> overrides = a->overrides;
                   if (a->ranks_per_node > 0)
                     overrides.push_back(fmt::format("comm.ranks_per_node={}", a->ranks_per_node));
                   return train::plan_command(a->path, overrides, a->ranks, a->json, a->data);
                 }});
}

}  // namespace shardtrain::cli
