// `shardtrain bench step CONFIG`: how close a training step comes to the
// GEMM speed of the machine. It records the GEMM calls of one real training
// step (shapes and transposes, through cpu::GemmRecorder), then alternates
// rounds of (a) real training steps on the config's data and (b) replays of
// exactly those GEMM calls on buffers of the same shapes, and reports
//   step GFLOP/s  = model FLOPs per step / step time
//   GEMM GFLOP/s  = the same FLOPs / time of the replayed GEMMs alone
// and their ratio: the share of the machine's GEMM speed the step achieves.
// Model FLOPs are the multiply-adds of forward and backward GEMMs (2*M*N*K
// each); elementwise work is not counted, so it can only lower the ratio.
#pragma once

#include "runtime/train/config.h"

#include <string>

namespace shardtrain::train {

struct BenchStepOptions {
  int steps = 50;         // training steps per round (and GEMM replays per round)
  int rounds = 5;         // alternating rounds; medians are reported
  int warmup = 10;        // untimed steps first
  std::string json_path;  // also write the figures here when not empty
};

int bench_step(const Config& config, const BenchStepOptions& options);

}  // namespace shardtrain::train
