// Helpers of the communicator tests (tests/mpi/comm_*_test.cpp): world
// communicators per configuration, created once and shared by the tests;
// inputs every rank can generate for every rank; checks across ranks done
// with plain MPI on MPI_COMM_WORLD (not with the code under test).
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/core/rng.h"
#include "runtime/core/tensor.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardtrain::comm::testing {

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Configurations of the world communicator the tests run under. Small chunks
// make buffers of a few KiB span many chunks of the pipeline.
inline CommOptions options_for(const std::string& config) {
  CommOptions o;
  o.timeout_s = 60;  // a hang fails the test run in a minute, with the watchdog's report
  o.tuning = "off";  // the thresholds these tests expect, whatever this machine's cache holds
  if (config == "mpi") {
    o.allreduce_algorithm = AllreduceAlgorithm::mpi;
  } else if (config == "ring") {
    o.allreduce_algorithm = AllreduceAlgorithm::ring;
    o.chunk_bytes = 1024;
  } else if (config == "ring-default-chunk") {
    o.allreduce_algorithm = AllreduceAlgorithm::ring;
  } else if (config == "hierarchical") {
    // Emulated nodes: 2 ranks per node when the ranks pair up, else one rank
    // per node (the same number on every node either way).
    o.allreduce_algorithm = AllreduceAlgorithm::hierarchical;
    o.ranks_per_node = world_size() % 2 == 0 ? 2 : 1;
    o.chunk_bytes = 1024;
    o.small_message_bytes = 256;  // larger shards cross the nodes by ring
  } else if (config == "emulated-nodes") {
    // The thresholds, on emulated nodes of 2 ranks (1 on odd worlds).
    o.ranks_per_node = world_size() % 2 == 0 ? 2 : 1;
  } else if (config == "beside-groups") {
    // As HYBRID's world: emulated nodes of 2 ranks, the world's MPI-library
    // collectives polled (CommOptions::world_beside_groups).
    o.ranks_per_node = world_size() % 2 == 0 ? 2 : 1;
    o.world_beside_groups = true;
    o.oneshot_bytes = 0;
    o.small_message_bytes = 4096;
  } else if (config == "auto-small") {
    // Point to point only: auto all-reduces one-shot while (ranks - 1) times
    // the size is at most 1 KiB, with MPI's own up to 2 KiB, by ring beyond
    // (and the other collectives by ring from 2 KiB).
    o.shared_memory = false;
    o.oneshot_bytes = 1024;
    o.small_message_bytes = o.reduce_scatter_small_bytes = o.allgather_small_bytes = 2048;
    o.chunk_bytes = 2048;
  } else if (config == "oneshot") {
    o.allreduce_algorithm = AllreduceAlgorithm::oneshot;
  } else if (config == "shm") {  // shared memory (one machine here), forced
    o.allreduce_algorithm = AllreduceAlgorithm::shm;
  } else if (config != "auto") {
    ADD_FAILURE() << "unknown test configuration " << config;
  }
  return o;
}

inline Communicator& world(const std::string& config) {
  static std::map<std::string, std::unique_ptr<Communicator>> worlds;
  auto& c = worlds[config];
  if (!c) c = make_mpi_world_communicator(options_for(config));
  return *c;
}

// Rank `rank`'s input: n values in [-1, 1), exactly representable in `dtype`.
inline std::vector<float> input(uint64_t seed, int rank, int64_t n, DType dtype) {
  Rng rng(stream_key(seed, uint64_t(rank), 0));
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    x = rng.uniform(-1.0f, 1.0f);
    if (dtype == DType::bf16) x = to_f32(to_bf16(x));
  }
  return v;
}

inline Tensor to_tensor(const std::vector<float>& v, DType dtype) {
  Tensor t = Tensor::empty({int64_t(v.size())}, dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::bf16)
      t.bf16_data()[i] = to_bf16(v[i]);
    else if (dtype == DType::f32)
      t.f32()[i] = v[i];
    else
      t.i32()[i] = int32_t(v[i]);
  }
  return t;
}

inline std::vector<float> to_vector(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype() == DType::bf16  ? to_f32(t.bf16_data()[i])
           : t.dtype() == DType::f32 ? t.f32()[i]
                                     : float(t.i32()[i]);
  return v;
}

// FNV-1a of a tensor's bytes.
inline uint64_t hash(const Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// True on every rank if every rank of the world passed the same value.
inline bool same_on_all_ranks(uint64_t value) {
  std::vector<uint64_t> all(static_cast<size_t>(world_size()));
  MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t v : all)
    if (v != value) return false;
  return true;
}

// Unit roundoff of a reduction's dtype.
inline double roundoff(DType dtype) { return dtype == DType::bf16 ? 0x1p-8 : 0x1p-24; }

}  // namespace shardtrain::comm::testing
