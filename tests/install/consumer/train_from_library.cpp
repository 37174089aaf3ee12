// Trains what a shardtrain config file describes, through the library:
//   mpirun -n 2 train_from_library CONFIG RUN_DIR [key=value]...
// the user's own main calling the trainer, as `shardtrain train` does.
#include "shardtrain/train.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: train_from_library CONFIG RUN_DIR [key=value]...\n");
    return 2;
  }
  try {
    const std::vector<std::string> overrides(argv + 3, argv + argc);
    const shardtrain::train::Config config = shardtrain::train::load_config(argv[1], overrides);
    shardtrain::comm::MpiEnv mpi(&argc, &argv);
    shardtrain::train::TrainOptions options;
    options.run_dir = argv[2];
    options.overwrite = true;
    return shardtrain::train::run_training(config, options, mpi);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_from_library: %s\n", e.what());
    return 1;
  }
}
