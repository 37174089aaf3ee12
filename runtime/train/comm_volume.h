// Communication volume per step and rank, measured against theory: what a
// bandwidth-optimal (ring) implementation of the strategy must send, with
// Ψ the parameter bytes and N the ranks: DDP 2(N-1)/N Ψ (one all-reduce),
// FSDP FULL_SHARD 3(N-1)/N Ψ (all-gather in forward and backward,
// reduce-scatter), SHARD_GRAD_OP 2(N-1)/N Ψ (one all-gather, one
// reduce-scatter), HYBRID with n ranks per node and R nodes 3(n-1)/n Ψ within
// the node plus 2(R-1)/R Ψ/n across nodes (the shard's gradient all-reduce).
// The measured figure counts the same way per collective
// (parallel::CommStats::wire_bytes), so the two differ only by what the
// implementation adds (padding of shards) or saves (FULL_SHARD does not
// gather the last Block again for its backward). With k micro-batches
// (train.accumulation_steps) FSDP gathers for every micro-batch and reduces
// once: FULL_SHARD (2k g + r)(N-1)/N, SHARD_GRAD_OP (k g + r)(N-1)/N; DDP
// still all-reduces once (no_sync).
#pragma once

#include <cstdint>
#include <string>

namespace shardtrain::train {

// shard_group: ranks a HYBRID shard group has (ranks per node); ignored
// otherwise. gather_bytes / reduce_bytes: bytes per element of what is
// all-gathered (FSDP's parameter dtype) and reduced (DDP's gradient dtype,
// FSDP's reduce dtype): 4 for f32, 2 for bf16.
double theory_wire_bytes(const std::string& strategy, const std::string& fsdp_sharding, int64_t parameters,
                         int world, int shard_group = 0, int gather_bytes = 4, int reduce_bytes = 4,
                         int micro_batches = 1);
// "[summary] communication volume: ..." for the log.
std::string comm_volume_line(const std::string& strategy, const std::string& fsdp_sharding, int64_t parameters,
                             int world, double measured_wire_bytes_per_step, int shard_group = 0,
                             int gather_bytes = 4, int reduce_bytes = 4, int micro_batches = 1);

}  // namespace shardtrain::train
