// libFuzzer target: the training config (TOML) and --set overrides, through
// load_config as `shardtrain train` calls it. The input is the file; each
// line "#set KEY=VALUE" (a TOML comment, so the file still parses) is also
// passed as an override.
#include "runtime/train/config.h"
#include "tests/fuzz/fuzz_util.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;
using namespace shardtrain;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string seeds = fuzz::seed_dir();
  if (seeds.empty()) return 0;
  // One with overrides; scripts/fuzz.sh adds the examples' configs.
  std::ofstream(fs::path(seeds) / "overrides.toml") << "[train]\nepochs = 2\n#set train.epochs=3\n"
                                                       "#set optim.lr=0.5\n#set ~parallel.ddp\n";
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = fuzz::scratch_dir() / "config.toml";
  fuzz::write_file(path, data, size);
  std::vector<std::string> overrides;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#set ", 0) == 0) overrides.push_back(line.substr(5));
  fuzz::refusing_errors([&] { (void)train::load_config(path.string(), overrides); });
  return 0;
}
