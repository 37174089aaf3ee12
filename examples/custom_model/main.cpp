// resmlp_train: shardtrain's trainer with one more model, the residual MLP
// of residual_mlp.h, in a program of its own.
//   resmlp_train --check-gradients
//   mpirun -n 2 resmlp_train CONFIG [--set KEY=VALUE]... [--run-dir DIR] [--overwrite] [--resume auto|FILE]
//   resmlp_train CONFIG --plan RANKS      the memory plan, as `shardtrain plan`
// The same config keys, strategies, data pipeline, checkpoints and telemetry
// as `shardtrain train` (docs/config.md).
#include "residual_mlp.h"
#include "residual_unit.h"
#include "shardtrain/model.h"
#include "shardtrain/train.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: resmlp_train --check-gradients\n"
               "       resmlp_train CONFIG [--set KEY=VALUE]... [--run-dir DIR] [--overwrite] [--resume auto|FILE]\n"
               "       resmlp_train CONFIG [--set KEY=VALUE]... --plan RANKS\n");
  return 2;
}

// The unit's backward against finite differences, at a small size.
int check_gradients() {
  resmlp::ResidualUnit unit(6, 10);
  const shardtrain::nn::GradientCheckResult r = shardtrain::nn::check_gradients(unit, shardtrain::Shape{6});
  std::printf("residual unit: %s\n", r.summary().c_str());
  return r.passed() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  resmlp::register_residual_mlp();  // before any config is loaded
  std::string config_path;
  std::vector<std::string> overrides;
  shardtrain::train::TrainOptions options;
  int plan_ranks = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--check-gradients") return check_gradients();
    if (arg == "--set" && has_value) {
      overrides.push_back(argv[++i]);
    } else if (arg == "--run-dir" && has_value) {
      options.run_dir = argv[++i];
    } else if (arg == "--resume" && has_value) {
      options.resume = argv[++i];
    } else if (arg == "--plan" && has_value) {
      plan_ranks = std::atoi(argv[++i]);
      if (plan_ranks < 1) return usage();
    } else if (arg == "--overwrite") {
      options.overwrite = true;
    } else if (config_path.empty() && arg.rfind("--", 0) != 0) {
      config_path = arg;
    } else {
      return usage();
    }
  }
  if (config_path.empty()) return usage();

  shardtrain::train::Config config;
  try {
    if (plan_ranks > 0) return shardtrain::train::plan_command(config_path, overrides, plan_ranks, /*json=*/false);
    config = shardtrain::train::load_config(config_path, overrides);  // a bad config is an error before MPI starts
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resmlp_train: %s\n", e.what());
    return 1;
  }
  shardtrain::comm::MpiEnv mpi(&argc, &argv);
  try {
    return shardtrain::train::run_training(config, options, mpi);
  } catch (const std::exception& e) {
    // One line naming the rank; with several ranks, the whole job ends.
    shardtrain::train::report_fatal_error(e, mpi.rank(), mpi.world_size());
    return 1;
  }
}
