// `shardtrain bench step CONFIG`: how close a training step comes to the
// speed of its own products on this machine. It records the products of one
// real training step (GEMM shapes and transposes, and the convolution passes
// oneDNN computes whole, through cpu::GemmRecorder), then alternates rounds
// of (a) real training steps on the config's data and (b) replays of exactly
// those products (shapes, strides, alpha and beta) on buffers shared between
// calls as the step shared its matrices, through the same backend and
// precision (runtime.cpu_backend, runtime.precision), and reports
//   step GFLOP/s      = model FLOPs per step / step time
//   products GFLOP/s  = the same FLOPs / time of the replayed products alone
// and their ratio: the share of the products' speed the step achieves.
// Model FLOPs are the multiply-adds of forward and backward products (2*M*N*K
// per GEMM, 2*OC*OH*OW*C*K*K per convolution pass and sample); elementwise
// work is not counted, so it can only lower the ratio.
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
