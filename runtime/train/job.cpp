#include "runtime/train/job.h"

#include "kernels/cpu/gemm.h"
#include "kernels/devices.h"
#include "runtime/train/run_lines.h"

namespace shardtrain::train {
namespace {

int64_t total_steps_of(const Config& config, int64_t steps_per_epoch) {
  const int64_t all = steps_per_epoch * config.train.epochs;
  return config.train.max_steps > 0 ? std::min(all, config.train.max_steps) : all;
}

}  // namespace

Job::Job(const Config& cfg, RunContext& context, const comm::MpiEnv& m, std::unique_ptr<parallel::StrategySpec> sp)
    : config(cfg),
      ctx(context),
      mpi(m),
      spec(std::move(sp)),
      staging(cfg, m.local_rank()),
      s(make_session(cfg, staging.locator(), m.local_rank())),
      sampler(s.train_size(), cfg.train.global_batch_size, m.rank(), m.world_size(), uint64_t(cfg.train.seed),
              io::sampler_options(cfg.data.loader, s.train_info().shard_sizes)),
      steps_per_epoch(sampler.batches_per_epoch()),
      total_steps(total_steps_of(cfg, steps_per_epoch)),
      schedule(cfg.schedule, cfg.optim.lr, total_steps),
      buffers(make_step_buffers(s, sampler.local_batch())) {
  RunDir& run = ctx.run;
  nn::Model& model = *s.model;
  nodes = check_nodes(config, mpi, run);
  if (!s.device.is_cpu())
    run.log(device_line(s.device, cuda_devices()[size_t(s.device.index)].name,
                        std::string(name_of(config.runtime.gpu_gemm_used()))));
  if (s.device.is_cpu() && !s.emulated && !s.compute_profile)
    run.log(fmt::format("[init] cpu: {} (runtime.cpu_backend = {}), {} thread(s) per rank", cpu::cpu_backend_summary(),
                        name_of(config.runtime.cpu_backend), config.runtime.blas_threads));
  if (config.runtime.precision == Precision::bf16)
    run.log(
        "[init] precision: mixed (runtime.precision = bf16): bf16 GEMMs, transformer activations and logits; "
        "f32 parameters, gradients, optimizer state and reductions");
  if (s.emulated)
    run.log(
        fmt::format("[init] device: emulated accelerator (nothing trained or evaluated), {}", s.emulated->source()));
  if (s.compute_profile)
    run.log(fmt::format(
        "[init] compute: emulated (nothing trained or evaluated): each Block, the optimizer and the loss wait "
        "the times of {}; the collectives are real",
        s.compute_profile->source));
  comm::Communicator* grad_comm = nullptr;  // where gradients travel
  if (spec->communicates()) {
    comm::CommOptions comm_options = config.comm;
    comm_options.world_beside_groups = spec->uses_groups();
    if (config.debug.slow_rank == mpi.rank() && config.debug.slow_comm_ms > 0) {
      // Spread the per-step delay over the step's collectives.
      comm_options.debug_delay_s =
          config.debug.slow_comm_ms * 1e-3 /
          double(spec->collectives_per_step(model.flat(), int(config.train.accumulation_steps)));
      injected_comm_s = config.debug.slow_comm_ms * 1e-3;
    }
    comm = comm::make_mpi_world_communicator(comm_options);
    if (const std::string how = comm->algorithm_choice(); !how.empty()) run.log("[init] comm: " + how);
    grad_comm = comm.get();
    if (!s.device.is_cpu()) {
      device_comm = make_gradient_communicator(*comm, comm_options, s.device, run, &fabric);
      grad_comm = device_comm.get();
    }
  }
  topology = {mpi.world_size(), comm ? comm->node().size() : 1};
  plan_inputs = train::plan_inputs(config, topology);
  strategy = spec->start(model, grad_comm);
  strategy->broadcast_parameters();
  make_optimizer(s, config, *strategy);
  ctx.mllog.event("train_samples", s.train_size());
  ctx.mllog.event("eval_samples", s.test_data.size());
  run.log(data_line(s.train_info(), s.test_data.info(), s.train_size(), s.test_data.size(),
                    config.data.loader.verify_checksums));
  if (s.train_stream) run.log(stream_line(s.train_info(), config));
  if (s.train_stream && !s.train_stream->stats().peer_cache.empty()) {
    const io::LoaderStats ls = s.train_stream->stats();
    run.log(config.data.loader.peer_sparse_split
                ? fmt::format("[init] data: {}; each node fetched its share from the object store", ls.peer_cache)
                : fmt::format("[init] data: {}; rank 0 copied {:.1f} MB from the shared store", ls.peer_cache,
                              double(ls.staged_bytes) / 1e6));
  }
  run.log(s.emulated ? "[init] model: none, an emulated accelerator's steps wait (a one-value linear layer stands in)"
                     : model_line(config, model));
  if (const std::string line = strategy->describe(plan_inputs); !line.empty()) run.log("[init] " + line);
  // Checked against the smallest rank's share, the same answer on every
  // rank: a rank that alone refused would leave the others waiting in their
  // first collective (a hang until comm.timeout_s, with this message lost).
  const int64_t micro_batches = config.train.accumulation_steps;
  const int64_t smallest_share = config.train.global_batch_size / mpi.world_size();
  ST_CHECK(smallest_share >= micro_batches,
           "train.accumulation_steps = {} exceeds the {} samples per step of the smallest rank's share (global "
           "batch {} over {} ranks)",
           micro_batches, smallest_share, config.train.global_batch_size, mpi.world_size());
  checkpoints =
      std::make_unique<Checkpointing>(config, ctx.dir, s, *strategy, spec->name(), mpi.rank(), mpi.world_size());
}

MemoryPlan Job::memory_plan() const {
  PlanData data;
  // The data's, not the model's: an emulated accelerator's stand-in model
  // reads one value (session.cpp).
  data.sample = s.language_model ? Shape{s.lm_tokens} : s.train_info().sample_shape;
  data.stored_sample_bytes = int64_t(s.train_info().sample_bytes());
  data.classes = s.train_info().num_classes;
  data.tokens = buffers.tokens;
  data.test_samples = s.test_data.size();
  return plan_memory(config, *s.model, data, topology);
}

}  // namespace shardtrain::train
