// The communicator gradients travel over when the model is on a GPU
// (runtime.device = "cuda"), chosen by comm.backend: NCCL, or MPI with device
// buffers (CUDA-aware, else staged through pinned host memory). "auto" takes
// NCCL when libnccl.so.2 loads on every rank (agreed over MPI, so that no
// rank waits in a setup the others skipped). With NCCL, each rank's NCCL INFO
// output goes to <run>/nccl/ and the fabric it reports (transport, GPUDirect
// RDMA, devices; warnings for RoCE without GDR or a fallback to sockets) is
// written to the run log and <run>/nccl/fabric.json, and on rank 0 to
// `fabric` (the same JSON and its summary lines) for the run's summary. Host
// tensors (DDP's model check) go over `world` either way
// (comm/routing_communicator.h).
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/core/device.h"
#include "runtime/train/run_dir.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace shardtrain::train {

// The fabric NCCL reported (telemetry/nccl_log.h): rank 0's view of every
// rank's log; empty when gradients go over MPI.
struct FabricInfo {
  nlohmann::json report;  // fabric_json
  std::string text;       // fabric_summary_text: one line per finding
};

std::unique_ptr<comm::Communicator> make_gradient_communicator(comm::Communicator& world,
                                                               const comm::CommOptions& options, Device device,
                                                               RunDir& run, FabricInfo* fabric = nullptr);

}  // namespace shardtrain::train
