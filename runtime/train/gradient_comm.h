// The communicator gradients travel over when the model is on a GPU
// (runtime.device = "cuda"), chosen by comm.backend: NCCL, or MPI with device
// buffers (CUDA-aware, else staged through pinned host memory). "auto" takes
// NCCL when libnccl.so.2 loads on every rank (agreed over MPI, so that no
// rank waits in a setup the others skipped). With NCCL, each rank's NCCL INFO
// output goes to <run>/nccl/ and the fabric it reports (transport, GPUDirect
// RDMA, devices; warnings for RoCE without GDR or a fallback to sockets) is
// written to the run log and <run>/nccl/fabric.json. Host tensors (DDP's
// model check) go over `world` either way (comm/routing_communicator.h).
#pragma once

#include "runtime/comm/communicator.h"
#include "runtime/core/device.h"
#include "runtime/train/run_dir.h"

#include <memory>

namespace shardtrain::train {

std::unique_ptr<comm::Communicator> make_gradient_communicator(comm::Communicator& world,
                                                               const comm::CommOptions& options,
                                                               Device device, RunDir& run);

}  // namespace shardtrain::train
