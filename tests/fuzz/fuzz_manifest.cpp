// libFuzzer target: manifest.json, through the checks a loader runs before it
// trusts a split: parse it (read_manifest), compare it with the shard files
// (check_manifest_against_files), then verify each shard's size and CRC-32
// (verify_shard). The split is a small synthetic one written at start-up.
#include "io/hdf5_handle.h"
#include "io/manifest.h"
#include "io/synthetic.h"
#include "tests/fuzz/fuzz_util.h"

#include <filesystem>

namespace fs = std::filesystem;
using namespace shardtrain;

namespace {

fs::path split_dir() { return fuzz::scratch_dir() / "split"; }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  io::h5::silence_errors();
  io::SyntheticOptions options;
  options.out_dir = split_dir().string();
  options.samples = 12;
  options.sample_bytes = 6;
  options.shards = 3;
  options.num_classes = 4;
  io::prep_synthetic(options);
  const std::string seeds = fuzz::seed_dir();
  if (!seeds.empty()) {
    fs::copy_file(io::manifest_path(split_dir().string()), fs::path(seeds) / "manifest.json");
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = split_dir().string();
  fuzz::write_file(io::manifest_path(dir), data, size);
  fuzz::refusing_errors([&] {
    const auto manifest = io::read_manifest(dir);
    if (!manifest) return;
    io::check_manifest_against_files(dir, *manifest);
    for (const io::ManifestShard& shard : manifest->shards)
      io::verify_shard((split_dir() / shard.file).string(), shard);
  });
  return 0;
}
