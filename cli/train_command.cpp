// shardtrain train CONFIG [--set k=v]... [--run-dir DIR] [--overwrite] [--resume auto|FILE]
#include "cli/command.h"
#include "runtime/train/config.h"
#include "runtime/train/trainer.h"

namespace shardtrain::cli {

void add_train_command(CLI::App& app, std::vector<Command>& out) {
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    train::TrainOptions options;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model as a config file describes");
  cmd->add_option("config", a->config, "TOML config (see examples/ and docs/config.md)")->required();
  cmd->add_option("--set", a->overrides, "Override a config key: --set train.epochs=3 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--run-dir", a->options.run_dir, "Run directory (default: run.dir, else runs/<name>-<time>)");
  cmd->add_flag("--overwrite", a->options.overwrite, "Reuse a run directory that holds an earlier run");
  cmd->add_option("--resume", a->options.resume,
                  "Continue from a checkpoint: \"auto\" (the newest in the run directory; step 0 if none) or a "
                  "checkpoint file (any world size and strategy)");
  out.push_back({cmd, [a](Process& p) {
                   // The config first: a bad one is an error before MPI starts.
                   const train::Config config = train::load_config(a->config, a->overrides);
                   return train::run_training(config, a->options, p.mpi());
                 }});
}

}  // namespace shardtrain::cli
