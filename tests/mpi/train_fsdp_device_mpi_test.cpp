// FSDP on the GPU (runtime.device = "cuda"), under mpirun with every rank on
// device 0 (the ranks share a test machine's one GPU), collectives through
// MPI with device buffers: FULL_SHARD, SHARD_GRAD_OP and HYBRID (nodes of
// one rank: pure replication) give the parameters the CPU's FSDP gives after
// 5 steps (GPU GEMMs in f32), and bf16 mixed precision tracks the CPU's bf16
// run. Prints GPUCHECK lines for scripts/gpu-check.sh's table. Skips without
// a GPU (CI), so it only runs where one is lent.
#include "kernels/cpu/gemm.h"
#include "kernels/devices.h"
#include "runtime/comm/gpu_backend.h"
#include "runtime/core/device_memory.h"
#include "runtime/nn/models.h"
#include "runtime/parallel/fsdp.h"
#include "runtime/train/session.h"
#include "tests/mpi/train_test_util.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

using namespace shardtrain;
using namespace shardtrain::train::testing;

namespace {

constexpr int64_t kSteps = 5;

bool gpu_on_every_rank(std::string& why) {
  int have = cuda_devices(&why).empty() ? 0 : 1, all = 0;
  MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

comm::Communicator& device_world() {
  static std::unique_ptr<comm::Communicator> c = [] {
    comm::CommOptions o;
    o.timeout_s = 60;
    o.ranks_per_node = 1;  // HYBRID: every rank its own node
    return comm::make_device_mpi_world_communicator(0, o);
  }();
  return *c;
}

nn::ModelSpec mlp_spec() {
  nn::ModelSpec spec;
  spec.hidden = {40, 24, 16};  // 4 Blocks: prefetch windows slide
  return spec;
}

optim::OptimizerConfig sgd() {
  optim::OptimizerConfig oc;
  oc.lr = 0.1f;
  oc.momentum = 0.9f;
  oc.weight_decay = 0.01f;
  return oc;
}

// FSDP's parameters (host) after kSteps steps on `device`.
Tensor fsdp_run(const nn::ModelSpec& spec, Device device, comm::Communicator& comm, parallel::FsdpOptions fo) {
  auto model = nn::build_model(spec, kSample, kClasses);
  model->initialize(5);
  if (!device.is_cpu()) model->to(device);
  parallel::Fsdp fsdp(*model, comm, fo);
  fsdp.broadcast_parameters();
  auto opt = optim::make_optimizer(sgd(), fsdp.shard_numel(),
                                   fsdp.shard_optimizer_ranges(train::optimizer_ranges(model->flat())), device);
  const Slice s = my_slice();
  train::StepBuffers b(kSample, kClasses, s.end - s.begin, device);
  for (int64_t step = 0; step < kSteps; ++step) {
    load_batch(step, s, b);
    if (!device.is_cpu()) copy_tensor(b.x, b.x_host);
    train::train_step(*model, *opt, b, sgd().lr, 0.05, kGlobalBatch, 1, fsdp);
  }
  return fsdp.full_parameters();
}

double rel_error(const Tensor& got, const Tensor& want) {
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, double(std::fabs(got.f32()[i] - want.f32()[i])));
    scale = std::max(scale, double(std::fabs(want.f32()[i])));
  }
  return worst / std::max(scale, 1e-30);
}

void report(const std::string& name, const char* dtype, double err, double limit) {
  if (world().rank() == 0)
    std::printf("GPUCHECK kernel=%s dtype=%s relerr=%.3e limit=%.0e ok=%d\n", name.c_str(), dtype, err, limit,
                err < limit ? 1 : 0);
  EXPECT_LT(err, limit) << name;
}

}  // namespace

TEST(FsdpOnGpu, MatchesTheCpuForEveryShardingMode) {
  std::string why;
  if (!gpu_on_every_rank(why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  use_cuda_device(0);
  set_gpu_gemm_precision("f32");
  const std::pair<const char*, parallel::ShardingMode> modes[] = {{"full", parallel::ShardingMode::full_shard},
                                                                  {"grad_op", parallel::ShardingMode::shard_grad_op},
                                                                  {"hybrid", parallel::ShardingMode::hybrid}};
  for (const nn::ModelSpec& spec : {mlp_spec(), cnn_spec()}) {
    for (const auto& [name, mode] : modes) {
      parallel::FsdpOptions fo;
      fo.mode = mode;
      const Tensor cpu = fsdp_run(spec, Device::cpu(), device_world(), fo);
      const Tensor gpu = fsdp_run(spec, Device::cuda(0), device_world(), fo);
      report(fmt::format("fsdp_{}_{}_np{}", name, spec.kind, world().size()), "f32", rel_error(gpu, cpu), 1e-3);
    }
  }
}

TEST(FsdpOnGpu, Bf16MixedPrecisionTracksTheCpu) {
  std::string why;
  if (!gpu_on_every_rank(why)) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  use_cuda_device(0);
  parallel::FsdpOptions fo;
  fo.param_dtype = fo.reduce_dtype = DType::bf16;
  cpu::set_gemm_precision(cpu::GemmPrecision::bf16);
  const Tensor cpu = fsdp_run(cnn_spec(), Device::cpu(), device_world(), fo);
  cpu::set_gemm_precision(cpu::GemmPrecision::f32);
  set_gpu_gemm_precision("bf16");
  const Tensor gpu = fsdp_run(cnn_spec(), Device::cuda(0), device_world(), fo);
  set_gpu_gemm_precision("f32");
  report(fmt::format("fsdp_full_cnn_np{}", world().size()), "bf16", rel_error(gpu, cpu), 1e-2);
}
