// Helpers shared by the data-parallel training tests (train_ddp_test,
// train_fsdp_test): a tiny data set generated per step, identical on every
// rank; each rank's slice of a global batch; parameter comparison.
#pragma once

#include "io/dataset_writer.h"
#include "runtime/core/rng.h"
#include "runtime/core/tensor.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/train/session.h"
#include "tests/mpi/comm_test_util.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace shardtrain::train::testing {

inline constexpr int64_t kGlobalBatch = 24;  // divisible by 1..4 ranks, and uneven for 5+
inline const Shape kSample{1, 6, 6};
inline constexpr int64_t kClasses = 4;

// The default configuration, a hang failing the test within a minute.
inline comm::Communicator& world() { return comm::testing::world("auto"); }

// A test split of n random samples (kSample, kClasses) that rank 0 writes
// into a directory named after its process id (every rank gets the same
// name); the caller removes it.
inline std::string write_test_split(comm::Communicator& c, const std::string& name, int64_t n) {
  const auto pid0 = int64_t(gather_from_ranks(c, {double(::getpid())})[0][0]);
  const std::string dir = "/tmp/shardtrain-" + name + "-" + std::to_string(pid0);
  if (c.rank() == 0) {
    std::filesystem::create_directories(dir);
    io::shard_format::ShardHeader h;
    h.split = "test";
    h.num_classes = int32_t(kClasses);
    h.num_samples = n;
    h.sample_shape = kSample;
    h.dtype = io::SampleDType::f32;
    std::vector<float> x(size_t(n * kSample.numel()));
    std::vector<int32_t> y(static_cast<size_t>(n));
    Rng r(5);
    for (float& v : x) v = r.uniform(-1, 1);
    for (int32_t& v : y) v = int32_t(r.below(uint64_t(kClasses)));
    io::write_shard(dir + "/part-00000.h5", h, x.data(), y.data());
  }
  c.barrier()->wait();
  return dir;
}

inline nn::ModelSpec cnn_spec() {
  nn::ModelSpec spec;
  spec.kind = nn::ModelKind::cnn;
  spec.channels = {3, 4};
  spec.kernel_size = 3;
  spec.fc_hidden = {8};
  return spec;
}

// An MLP of 4 Blocks: prefetch windows of 2 really slide, buckets and
// slices cut through it.
inline nn::ModelSpec four_block_mlp_spec() {
  nn::ModelSpec spec;
  spec.hidden = {40, 24, 16};
  return spec;
}

// SGD with momentum and weight decay (decay differs per parameter: shard
// and slice ranges must keep it), and AdamW with weight decay.
inline optim::OptimizerConfig sgd_with_decay() {
  optim::OptimizerConfig oc;
  oc.lr = 0.1f;
  oc.momentum = 0.9f;
  oc.weight_decay = 0.01f;
  return oc;
}
inline optim::OptimizerConfig adamw_with_decay() {
  optim::OptimizerConfig oc;
  oc.kind = optim::OptimizerKind::adamw;
  oc.lr = 0.01f;
  oc.weight_decay = 0.1f;
  return oc;
}

// The whole global batch of step `step`, identical on every rank.
inline void global_batch(int64_t step, std::vector<float>& x, std::vector<int32_t>& y) {
  Rng r(stream_key(77, 0, uint64_t(step)));
  x.resize(size_t(kGlobalBatch * kSample.numel()));
  y.resize(size_t(kGlobalBatch));
  for (float& v : x) v = r.uniform(-1, 1);
  for (int32_t& v : y) v = int32_t(r.below(kClasses));
}

// Rows [begin, end) of a global batch.
struct Slice {
  int64_t begin, end;
};
inline Slice my_slice() {
  auto& c = world();
  return {kGlobalBatch * c.rank() / c.size(), kGlobalBatch * (c.rank() + 1) / c.size()};
}

// Rows `s` of step `step`'s global batch into `b`.
inline void load_batch(int64_t step, const Slice& s, StepBuffers& b) {
  std::vector<float> x;
  std::vector<int32_t> y;
  global_batch(step, x, y);
  std::memcpy(b.x_host.f32(), x.data() + s.begin * kSample.numel(),
              size_t((s.end - s.begin) * kSample.numel()) * sizeof(float));
  std::copy(y.begin() + s.begin, y.begin() + s.end, b.labels.begin());
}

// Every rank holds bit-identical parameters.
inline void expect_identical_across_ranks(const Tensor& params) {
  auto& c = world();
  Tensor all = Tensor::empty({params.numel() * c.size()});
  c.allgather(params, all)->wait();
  for (int r = 1; r < c.size(); ++r)
    ASSERT_EQ(std::memcmp(all.f32(), all.f32() + r * params.numel(), params.nbytes()), 0)
        << "rank " << r << " differs from rank 0";
}

// Largest |a - b| over two parameter buffers; a NaN counts as infinitely far.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double e = std::fabs(double(a.f32()[i]) - double(b.f32()[i]));
    if (!(e <= d)) d = std::isnan(e) ? INFINITY : e;
  }
  return d;
}

}  // namespace shardtrain::train::testing
