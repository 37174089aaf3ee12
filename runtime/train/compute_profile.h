// A per-Block compute profile: the times one rank's forward and backward of
// each Block, its optimizer and the rest of its step took for a batch, on
// the machine it was measured on. runtime.emulate.compute = "profile" runs
// training with these times as waits (nn/emulated_block.h), so that a
// study's ranks communicate as ranks with their own accelerators would.
//
// The file is JSON (docs/scaling.md, "Emulated compute"): what `shardtrain
// study` writes as calibration/compute-MODEL-wW.json, or one derived from a
// GPU's measurement or a roofline:
//   {"forward": [s per Block], "backward": [s per Block], "optimizer_s": s,
//    "other_s": s, "batch": samples per rank}
// optimizer_s is the whole model's update on one rank; other_s the rest of
// the step's compute (the loss above all).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::train {

struct ComputeProfile {
  std::vector<double> forward_s, backward_s;
  double optimizer_s = 0, other_s = 0;
  int64_t batch = 0;
  std::string source;  // the file and scale, for the logs
};

// The profile in `path`, every time multiplied by `scale`; an Error naming
// the file and the key that is missing, of the wrong type or negative.
ComputeProfile load_compute_profile(const std::string& path, double scale);

}  // namespace shardtrain::train
