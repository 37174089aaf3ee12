// DDP over NCCL on this machine's GPU (one rank: NCCL refuses two ranks on
// one device, so several ranks are for a machine with several GPUs). The wide
// GPT with one bucket per Block, its buckets launched one by one
// (parallel.ddp.bucket_batch = 1) and all in one NCCL group: on one rank the
// all-reduce leaves the gradients as they are, so both must give the
// parameters of training without DDP, bit for bit. Then the step time of
// both, alternated round by round. Lines for scripts/gpu-check.sh:
//   GPUCHECK kernel=ddp_nccl_<what> dtype=tf32 relerr=<e> limit=<l> ok=<0|1>
//   GPUTRAIN model=gpt-wide:ddp:b<k> precision=tf32 batch=<b> step_ms=<t> samples_s=<s> tflops=<f>
#include "runtime/comm/gpu_backend.h"
#include "runtime/comm/routing_communicator.h"
#include "runtime/core/clock.h"
#include "runtime/parallel/ddp.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/mpi_environment.h"
#include "tests/gpu/train_gpu_cases.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>

using namespace shardtrain;
using namespace shardtrain::gpu_test;

namespace {

[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

struct DdpRun {
  ModelRun run;
  parallel::Ddp ddp;
  DdpRun(const Case& c, comm::Communicator& comm, int64_t bucket_batch)
      : run(make_run(c, gpu())), ddp(*run.model, comm, options(bucket_batch)) {
    ddp.broadcast_parameters();
  }
  static parallel::DdpOptions options(int64_t bucket_batch) {
    parallel::DdpOptions o;
    o.first_bucket_mb = o.bucket_mb = 1e-3;  // below every Block: one bucket per Block
    o.bucket_batch = bucket_batch;
    return o;
  }
};

}  // namespace

TEST(GpuDdp, BucketBatchesOverNccl) {
  ST_REQUIRE_GPU();
  std::string why;
  if (!comm::nccl_loadable(&why)) GTEST_SKIP() << why;
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 1) GTEST_SKIP() << "runs on one rank (one GPU)";
  comm::CommOptions options;
  options.timeout_s = 60;
  auto host = comm::make_mpi_world_communicator(options);
  comm::RoutingCommunicator comm(*host, comm::make_nccl_world_communicator(0, options));

  set_gpu_gemm_precision("tf32");
  const Case c = gpt_wide_case();
  const double flops = step_flops(c);
  ModelRun plain = make_run(c, gpu());
  DdpRun one_by_one(c, comm, 1);
  const auto buckets = int64_t(one_by_one.ddp.buckets().size());
  DdpRun grouped(c, comm, buckets);
  std::printf("ddp: %lld buckets, bucket_batch 1 and %lld\n", static_cast<long long>(buckets),
              static_cast<long long>(buckets));
  EXPECT_GE(buckets, 4);

  constexpr int kChecked = 3;
  for (int i = 0; i < kChecked; ++i) {
    step(c, plain, i);
    step(c, one_by_one.run, i, &one_by_one.ddp);
    step(c, grouped.run, i, &grouped.ddp);
  }
  const Tensor& want = plain.model->flat().params();
  report("ddp_nccl_bucket_batch_1_params", "tf32", rel_error(one_by_one.run.model->flat().params(), want), 1e-7);
  report("ddp_nccl_bucket_batch_all_params", "tf32", rel_error(grouped.run.model->flat().params(), want), 1e-7);

  // Step time: rounds of each in turn, the best round of each.
  constexpr int kRounds = 4, kSteps = 10;
  double best[2] = {1e30, 1e30};
  int64_t next = kChecked;
  for (int round = 0; round < kRounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      DdpRun& r = k == 0 ? one_by_one : grouped;
      synchronize_gpu();
      const double t0 = now_seconds();
      for (int i = 0; i < kSteps; ++i) step(c, r.run, next + i, &r.ddp);
      synchronize_gpu();
      best[k] = std::min(best[k], (now_seconds() - t0) / kSteps);
    }
    next += kSteps;
  }
  for (int k = 0; k < 2; ++k)
    std::printf("GPUTRAIN model=gpt-wide:ddp:b%lld precision=tf32 batch=%lld step_ms=%.3f samples_s=%.0f tflops=%.2f\n",
                static_cast<long long>(k == 0 ? 1 : buckets), static_cast<long long>(c.batch), best[k] * 1e3,
                double(c.batch) / best[k], flops / best[k] * 1e-12);
  std::printf("ddp: step time grouped / one by one = %.3f\n", best[1] / best[0]);
  std::fflush(stdout);
  set_gpu_gemm_precision("f32");
}
