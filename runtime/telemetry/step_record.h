// The record of one training step on one rank: where its time went, its
// collectives, its I/O, memory and CPU. One JSON object per line in
// telemetry/rank-NNNNN.jsonl (docs/telemetry.md has the schema).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace shardtrain::telemetry {

struct CollectiveRecord {
  std::string op;         // "allreduce", ...
  std::string algorithm;  // "shm", "ring", ...
  int64_t seq = 0;
  int64_t bytes = 0;
  double duration_s = 0;   // data movement: all ranks arrived -> finished
  double peer_wait_s = 0;  // started -> all ranks arrived
  double busbw_gbs = 0;    // nccl-tests bus bandwidth over duration_s
};

// The device (or host) time of one class of op in a step (telemetry.op_timing;
// runtime/core/op_timing.h names the classes).
struct OpTime {
  std::string op;
  double s = 0;
  int64_t calls = 0;
};

struct StepRecord {
  int rank = 0;
  int64_t step = 0;      // 0-based optimizer step
  double epoch = 0;      // fractional
  double t_start_s = 0;  // seconds since the run started
  double step_s = 0;     // wall time of the step
  // Components of step_s (compute is the remainder).
  double data_wait_s = 0;         // waiting for the batch (storage stall)
  double h2d_s = 0;               // host-to-device copies not hidden (GPU)
  double comm_exposed_s = 0;      // blocked on this rank's collectives
  double blocked_on_peers_s = 0;  // blocked on collectives other ranks had not issued
  double debug_delay_s = 0;       // injected by [debug] (included in its component above)
  // Phases of the compute (they overlap communication).
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  // Communication proper (overlapped or not).
  double comm_s = 0;            // sum of the collectives' duration_s
  int64_t comm_bytes = 0;       // payload of the step's collectives, as the communicator counts it
  int64_t comm_wire_bytes = 0;  // what a ring sends per rank: the theory's figure (parallel::CommStats)
  std::vector<CollectiveRecord> collectives;
  // Outside the step, attributed to it (after it): evaluation, checkpoint.
  double eval_s = 0, checkpoint_s = 0;
  // I/O done for this step (reads of the data set).
  int64_t io_bytes = 0, io_requests = 0;
  double io_read_s = 0;     // time the loader's thread spent reading this batch
  int64_t io_queued = -1;   // batches ready in the prefetch queue when the step asked (-1: in memory)
  int64_t stage_bytes = 0;  // bytes the stager copied into the cache during the step
  // Memory (allocator accounting) and CPU time during the step.
  int64_t mem_cpu_current_bytes = 0, mem_cpu_peak_bytes = 0;
  int64_t mem_gpu_current_bytes = 0, mem_gpu_peak_bytes = 0;  // the rank's GPU (tensors' bytes), 0 on CPU
  double cpu_train_thread_s = 0;                              // CPU time of the training thread
  double cpu_process_s = 0;                                   // CPU time of all the rank's threads
  int64_t samples = 0;                                        // this rank's samples in the step
  std::vector<OpTime> ops;  // telemetry.op_timing: time per class of op (empty when off)

  double compute_s() const { return step_s - data_wait_s - h2d_s - comm_exposed_s - blocked_on_peers_s; }
  // The rank's own work: everything but waiting for other ranks.
  double busy_s() const { return step_s - blocked_on_peers_s; }
};

nlohmann::json to_json(const StepRecord& r);
StepRecord step_record_from_json(const nlohmann::json& j);

// nccl-tests bus-bandwidth factor of an operation over `ranks` ranks.
double busbw_factor(const std::string& op, int ranks);

}  // namespace shardtrain::telemetry
