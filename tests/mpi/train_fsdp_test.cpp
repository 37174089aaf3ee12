// FSDP under mpirun with 1-4 ranks: FULL_SHARD, SHARD_GRAD_OP and HYBRID
// (emulated nodes of 2 ranks, or shard groups of any size) give the
// parameters DDP gives (same data, same initialization), with any prefetch
// depth, with gradient accumulation, with SGD + weight decay and AdamW; the
// communication it issues per step; the memory figures.
#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/rng.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/parallel/ddp.h"
#include "runtime/parallel/fsdp.h"
#include "runtime/train/session.h"
#include "tests/mpi/comm_test_util.h"
#include "tests/mpi/train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <iostream>

using namespace shardtrain;

namespace {

using namespace train::testing;

constexpr int64_t kSteps = 5;

// DDP's parameters after `steps` steps (train::train_step).
Tensor ddp_params(const nn::ModelSpec& spec, const optim::OptimizerConfig& oc, int64_t steps,
                  parallel::CommStats* stats = nullptr, double clip = 0.0) {
  auto model = nn::build_model(spec, kSample, kClasses);
  model->initialize(5);
  auto opt = optim::make_optimizer(oc, model->flat().numel(), train::optimizer_ranges(model->flat()));
  parallel::Ddp ddp(*model, world(), {});
  ddp.broadcast_parameters();
  const Slice s = my_slice();
  train::StepBuffers b(kSample, kClasses, s.end - s.begin);
  for (int64_t step = 0; step < steps; ++step) {
    load_batch(step, s, b);
    train::train_step(*model, *opt, b, oc.lr, clip, kGlobalBatch, 1, ddp);
  }
  if (stats) *stats = ddp.take_stats();
  Tensor out = Tensor::empty({model->flat().numel()});
  std::memcpy(out.f32(), model->flat().params().f32(), out.nbytes());
  return out;
}

struct FsdpRun {
  Tensor params;
  parallel::FsdpStats stats;
  int blocks = 0;
  int64_t padded_numel = 0;  // sum over Blocks
  int64_t last_padded = 0;
  int replicas = 1, shard_group = 1;
  int64_t chunk_numel = 0;  // sum over Blocks of a rank's chunk
};

// Emulated nodes for HYBRID: 2 ranks per node when the ranks pair up (4
// ranks: 2 nodes x 2), else 1 (3 ranks: 3 nodes of one rank, pure
// replication); tests/mpi/comm_test_util.h, "hierarchical".
comm::Communicator& two_rank_nodes() { return comm::testing::world("hierarchical"); }

FsdpRun fsdp_params(const nn::ModelSpec& spec, const optim::OptimizerConfig& oc, int64_t steps,
                    const parallel::FsdpOptions& fo, int64_t micro_batches = 1, double clip = 0.0,
                    comm::Communicator* comm = nullptr) {
  auto model = nn::build_model(spec, kSample, kClasses);
  model->initialize(5);
  parallel::Fsdp fsdp(*model, comm ? *comm : world(), fo);
  fsdp.broadcast_parameters();
  auto opt = optim::make_optimizer(oc, fsdp.shard_numel(),
                                   fsdp.shard_optimizer_ranges(train::optimizer_ranges(model->flat())));
  const Slice s = my_slice();
  train::StepBuffers b(kSample, kClasses, s.end - s.begin);
  for (int64_t step = 0; step < steps; ++step) {
    load_batch(step, s, b);
    train::train_step(*model, *opt, b, oc.lr, clip, kGlobalBatch, micro_batches, fsdp);
  }
  FsdpRun run;
  run.stats = fsdp.take_fsdp_stats();
  run.replicas = fsdp.replicas();
  run.shard_group = fsdp.shard_group_size();
  for (int blk = 0; blk < model->num_blocks(); ++blk) run.chunk_numel += fsdp.layout().block(blk).chunk;
  run.params = fsdp.full_parameters();
  run.blocks = model->num_blocks();
  for (int blk = 0; blk < run.blocks; ++blk) run.padded_numel += fsdp.layout().padded_numel(blk);
  run.last_padded = fsdp.layout().padded_numel(run.blocks - 1);
  return run;
}

parallel::FsdpOptions opts(parallel::ShardingMode mode, int prefetch = 2) {
  parallel::FsdpOptions o;
  o.mode = mode;
  o.prefetch = prefetch;
  o.poison_freed = true;  // a Block used while freed would turn everything into NaN
  return o;
}

}  // namespace

// f32, 5 steps: DDP all-reduces each bucket, FSDP reduce-scatters each Block;
// both sum the same per-rank partial gradients, but the algorithms may add
// them in another order (and pair them differently across chunks), so the
// gradients agree to f32 rounding (~1e-7 relative), not to the bit, and 5
// steps of lr 0.1 momentum 0.9 (AdamW lr 0.01, which divides by sqrt(v) and so
// can amplify a rounding difference of a tiny gradient) keep parameters of
// O(0.1-1) within 1e-5 absolute. The DDP test's tolerance is 2e-5 for the same
// reason.
constexpr double kTolerance = 1e-5;

TEST(Fsdp, FullShardMatchesDdp) {
  for (const nn::ModelSpec& spec : {four_block_mlp_spec(), cnn_spec()}) {
    const Tensor ddp = ddp_params(spec, sgd_with_decay(), kSteps);
    const FsdpRun f = fsdp_params(spec, sgd_with_decay(), kSteps, opts(parallel::ShardingMode::full_shard));
    EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance) << name_of(spec.kind);
    if (world().rank() == 0)
      std::cout << fmt::format("[diff] {} ranks, {}: FULL_SHARD vs DDP max |diff| {:.3g}\n", world().size(), spec.kind,
                               max_abs_diff(f.params, ddp));
    expect_identical_across_ranks(f.params);
    // Forward gathers every Block, backward every Block but the last (kept).
    EXPECT_EQ(f.stats.allgathers, kSteps * (2 * f.blocks - 1)) << name_of(spec.kind);
    EXPECT_EQ(f.stats.reduce_scatters, kSteps * f.blocks) << name_of(spec.kind);
    EXPECT_EQ(f.stats.allgather_payload_bytes, kSteps * 4 * (2 * f.padded_numel - f.last_padded));
    EXPECT_EQ(f.stats.reduce_scatter_payload_bytes, kSteps * 4 * f.padded_numel);
  }
}

// HYBRID: FULL_SHARD inside each emulated node, the gradient shards
// all-reduced across nodes; the same parameters as DDP, and only the
// shard's chunks cross the nodes.
TEST(Fsdp, HybridMatchesDdp) {
  for (const nn::ModelSpec& spec : {four_block_mlp_spec(), cnn_spec()}) {
    const Tensor ddp = ddp_params(spec, sgd_with_decay(), kSteps);
    const FsdpRun f =
        fsdp_params(spec, sgd_with_decay(), kSteps, opts(parallel::ShardingMode::hybrid), 1, 0.0, &two_rank_nodes());
    EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance) << name_of(spec.kind);
    if (world().rank() == 0)
      std::cout << fmt::format("[diff] {} ranks ({} node(s) x {}), {}: HYBRID vs DDP max |diff| {:.3g}\n",
                               world().size(), f.replicas, f.shard_group, spec.kind, max_abs_diff(f.params, ddp));
    expect_identical_across_ranks(f.params);
    EXPECT_EQ(f.replicas * f.shard_group, world().size());
    EXPECT_EQ(f.shard_group, world().size() % 2 == 0 ? 2 : 1);
    EXPECT_EQ(f.stats.allgathers, kSteps * (2 * f.blocks - 1)) << name_of(spec.kind);
    EXPECT_EQ(f.stats.reduce_scatters, kSteps * f.blocks) << name_of(spec.kind);
    EXPECT_EQ(f.stats.replica_allreduces, f.replicas > 1 ? kSteps * f.blocks : 0) << name_of(spec.kind);
    EXPECT_EQ(f.stats.replica_allreduce_payload_bytes, f.replicas > 1 ? kSteps * 4 * f.chunk_numel : 0);
  }
}

TEST(Fsdp, HybridWithAdamWAndClippingMatchesDdp) {
  const Tensor ddp = ddp_params(cnn_spec(), adamw_with_decay(), kSteps, nullptr, 0.05);
  const FsdpRun f = fsdp_params(cnn_spec(), adamw_with_decay(), kSteps, opts(parallel::ShardingMode::hybrid), 2, 0.05,
                                &two_rank_nodes());
  EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance);
  expect_identical_across_ranks(f.params);
}

// HYBRID over groups of shard_group_size consecutive ranks, for every size
// that divides the world, on the plain world (one node) and on nodes of 2
// (groups inside, as large as and larger than a node): the same parameters
// as DDP; group 1 is pure replication, group = world is FULL_SHARD.
TEST(Fsdp, HybridOverShardGroupsOfEverySizeMatchesDdp) {
  const Tensor ddp = ddp_params(four_block_mlp_spec(), sgd_with_decay(), kSteps);
  for (comm::Communicator* comm : {&world(), &two_rank_nodes()}) {
    for (int k = 1; k <= comm->size(); ++k) {
      if (comm->size() % k != 0) continue;
      parallel::FsdpOptions o = opts(parallel::ShardingMode::hybrid);
      o.shard_group_size = k;
      const FsdpRun f = fsdp_params(four_block_mlp_spec(), sgd_with_decay(), kSteps, o, 1, 0.0, comm);
      EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance) << k;
      expect_identical_across_ranks(f.params);
      EXPECT_EQ(f.shard_group, k);
      EXPECT_EQ(f.replicas, comm->size() / k);
      EXPECT_EQ(f.stats.replica_allreduces, f.replicas > 1 ? kSteps * f.blocks : 0) << k;
      EXPECT_EQ(f.stats.replica_allreduce_payload_bytes, f.replicas > 1 ? kSteps * 4 * f.chunk_numel : 0) << k;
    }
  }
}

// A group size that does not divide the ranks, or HYBRID's key on another
// mode: an error naming the key, on every rank.
TEST(Fsdp, ShardGroupSizeThatDoesNotFitIsAnError) {
  auto model = nn::build_model(four_block_mlp_spec(), kSample, kClasses);
  parallel::FsdpOptions o = opts(parallel::ShardingMode::hybrid);
  o.shard_group_size = world().size() + 1;
  EXPECT_THAT([&] { parallel::Fsdp fsdp(*model, world(), o); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  fmt::format("parallel.fsdp.shard_group_size = {}: groups of {} ranks do not split the job's {} ranks",
                              o.shard_group_size, o.shard_group_size, world().size()))));
  o.mode = parallel::ShardingMode::full_shard;
  EXPECT_THAT([&] { parallel::Fsdp fsdp(*model, world(), o); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("applies to parallel.fsdp.sharding = \"hybrid\"")));
}

// Nodes of 2 ranks cannot hold 3 ranks evenly: every rank refuses HYBRID
// (a shard would have no replica on the odd node) instead of training wrong.
TEST(Fsdp, HybridRefusesUnevenNodes) {
  if (world().size() != 3) GTEST_SKIP() << "needs 3 ranks";
  comm::CommOptions o;
  o.ranks_per_node = 2;
  o.timeout_s = 60;
  auto pairs = comm::make_mpi_world_communicator(o);
  auto model = nn::build_model(four_block_mlp_spec(), kSample, kClasses);
  try {
    parallel::Fsdp fsdp(*model, *pairs, opts(parallel::ShardingMode::hybrid));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the job's 3 ranks do not make nodes of"));
  }
}

// Mixed precision: parameters gathered and multiplied in bf16, gradients
// reduce-scattered in bf16, f32 master weights. Against the f32 run after 5
// steps the parameters (O(0.1-1)) differ by bf16 rounding carried through
// the updates (measured 2e-4 to 9e-4 on 1-4 ranks): at most kMixedTolerance
// absolute; the gathers and reduce-scatters move exactly half the bytes.
constexpr double kMixedTolerance = 5e-3;

TEST(Fsdp, Bf16MixedPrecisionTracksF32) {
  for (const nn::ModelSpec& spec : {four_block_mlp_spec(), cnn_spec()}) {
    const FsdpRun f32 = fsdp_params(spec, sgd_with_decay(), kSteps, opts(parallel::ShardingMode::full_shard));
    parallel::FsdpOptions mixed = opts(parallel::ShardingMode::full_shard);
    mixed.param_dtype = DType::bf16;
    mixed.reduce_dtype = DType::bf16;
    // Fsdp itself makes the gathered Blocks' GEMMs bf16, and only theirs.
    const FsdpRun bf16 = fsdp_params(spec, sgd_with_decay(), kSteps, mixed);
    EXPECT_EQ(cpu::gemm_precision(), cpu::GemmPrecision::f32);
    const double diff = max_abs_diff(bf16.params, f32.params);
    if (world().rank() == 0)
      std::cout << fmt::format("[diff] {} ranks, {}: bf16 mixed precision vs f32 FSDP max |diff| {:.3g}\n",
                               world().size(), spec.kind, diff);
    EXPECT_LE(diff, kMixedTolerance) << name_of(spec.kind);
    EXPECT_GT(diff, 0.0) << name_of(spec.kind) << ": bf16 changed nothing";
    expect_identical_across_ranks(bf16.params);
    EXPECT_EQ(2 * bf16.stats.allgather_payload_bytes, f32.stats.allgather_payload_bytes);
    EXPECT_EQ(2 * bf16.stats.reduce_scatter_payload_bytes, f32.stats.reduce_scatter_payload_bytes);
  }
}

TEST(Fsdp, ShardGradOpMatchesDdp) {
  for (const nn::ModelSpec& spec : {four_block_mlp_spec(), cnn_spec()}) {
    const Tensor ddp = ddp_params(spec, sgd_with_decay(), kSteps);
    const FsdpRun f = fsdp_params(spec, sgd_with_decay(), kSteps, opts(parallel::ShardingMode::shard_grad_op));
    EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance) << name_of(spec.kind);
    expect_identical_across_ranks(f.params);
    EXPECT_EQ(f.stats.allgathers, kSteps * f.blocks) << name_of(spec.kind);  // kept from forward to backward
    EXPECT_EQ(f.stats.reduce_scatters, kSteps * f.blocks) << name_of(spec.kind);
  }
}

// The equality tests run with poison_freed: prove that freed Blocks really
// are NaN between steps, so a Block computed without its gather would show.
// Evaluation gathers every Block in each forward, so every rank must make
// the same number of passes: a batch of n / W samples divides the smaller
// shares and not the larger (103 samples over 2-4 ranks), and a split of one
// sample leaves all ranks but one without any.
TEST(Fsdp, EvaluationWithUnevenSharesMatchesOneRank) {
  auto& c = world();
  for (const int64_t n : {int64_t(103), int64_t(1)}) {
    const std::string dir = write_test_split(c, "fsdp-eval-" + std::to_string(n), n);
    const io::InMemoryDataset data = io::InMemoryDataset::load(dir);
    const int64_t batch = std::max<int64_t>(1, n / c.size());
    auto whole = nn::build_model(cnn_spec(), kSample, kClasses);
    whole->initialize(5);
    const train::EvalResult one = train::evaluate(*whole, data, batch);
    auto model = nn::build_model(cnn_spec(), kSample, kClasses);
    model->initialize(5);
    parallel::Fsdp fsdp(*model, c, opts(parallel::ShardingMode::full_shard));
    const train::EvalResult all = train::evaluate(*model, data, batch, &c, false, &fsdp);
    EXPECT_EQ(all.samples, n);
    EXPECT_DOUBLE_EQ(all.accuracy, one.accuracy) << n << " samples";  // counts are exact
    EXPECT_NEAR(all.loss, one.loss, 1e-6) << n << " samples";
    c.barrier()->wait();
    if (c.rank() == 0) std::filesystem::remove_all(dir);
  }
}

TEST(Fsdp, FreedBlocksArePoisonedUntilGathered) {
  auto model = nn::build_model(cnn_spec(), kSample, kClasses);
  model->initialize(5);
  parallel::Fsdp fsdp(*model, world(), opts(parallel::ShardingMode::full_shard));
  auto opt = optim::make_optimizer(sgd_with_decay(), fsdp.shard_numel(),
                                   fsdp.shard_optimizer_ranges(train::optimizer_ranges(model->flat())));
  const Slice s = my_slice();
  train::StepBuffers b(kSample, kClasses, s.end - s.begin);
  load_batch(0, s, b);
  train::train_step(*model, *opt, b, 0.1f, 0.0, kGlobalBatch, 1, fsdp);
  // The rank holds shards only; every Block is bound to a buffer freed
  // (poisoned) after its last use.
  EXPECT_FALSE(model->flat().has_buffers());
  EXPECT_TRUE(std::isnan(model->forward(b.x).f32()[0]));  // no hooks: nothing gathered
  const Tensor logits = model->forward(b.x, &fsdp);       // each Block gathered for its forward
  for (int64_t i = 0; i < logits.numel(); ++i) ASSERT_TRUE(std::isfinite(logits.f32()[i]));
}

TEST(Fsdp, AnyPrefetchDepthGivesTheSameParameters) {
  const Tensor ddp = ddp_params(four_block_mlp_spec(), sgd_with_decay(), kSteps);
  for (int k : {0, 1, 3, 8}) {
    const FsdpRun f =
        fsdp_params(four_block_mlp_spec(), sgd_with_decay(), kSteps, opts(parallel::ShardingMode::full_shard, k));
    EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance) << "prefetch " << k;
  }
}

TEST(Fsdp, AdamWWithWeightDecayMatchesDdp) {
  for (const nn::ModelSpec& spec : {four_block_mlp_spec(), cnn_spec()}) {
    const Tensor ddp = ddp_params(spec, adamw_with_decay(), kSteps);
    const FsdpRun f = fsdp_params(spec, adamw_with_decay(), kSteps, opts(parallel::ShardingMode::full_shard));
    EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance) << name_of(spec.kind);
  }
}

TEST(Fsdp, GradientAccumulationReduceScattersOncePerStep) {
  const Tensor ddp = ddp_params(cnn_spec(), sgd_with_decay(), kSteps);
  const FsdpRun f = fsdp_params(cnn_spec(), sgd_with_decay(), kSteps, opts(parallel::ShardingMode::full_shard), 2);
  EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance);
  EXPECT_EQ(f.stats.reduce_scatters, kSteps * f.blocks);
}

// What `debug.slow_comm_ms` spreads its delay over: the collectives of a
// step as counted, for each mode with one and two micro-batches.
TEST(Fsdp, CollectivesPerStepAsCounted) {
  for (const auto mode :
       {parallel::ShardingMode::full_shard, parallel::ShardingMode::shard_grad_op, parallel::ShardingMode::hybrid})
    for (const int64_t k : {int64_t(1), int64_t(2)}) {
      comm::Communicator* comm = mode == parallel::ShardingMode::hybrid ? &two_rank_nodes() : nullptr;
      const FsdpRun f = fsdp_params(cnn_spec(), sgd_with_decay(), kSteps, opts(mode), k, 0.0, comm);
      const int64_t counted = f.stats.allgathers + f.stats.reduce_scatters + f.stats.replica_allreduces;
      const int64_t per_step = parallel::collectives_per_step(f.blocks, mode, k);
      // HYBRID on one node has no cross-node all-reduces.
      const int64_t missing = mode == parallel::ShardingMode::hybrid && f.replicas == 1 ? f.blocks : 0;
      EXPECT_EQ(counted, kSteps * (per_step - missing)) << "mode " << int(mode) << ", " << k << " micro-batches";
    }
}

TEST(Fsdp, GradientClippingMatchesDdp) {
  // 0.05 is below the gradient norm of these steps: clipping really scales.
  const Tensor ddp = ddp_params(cnn_spec(), sgd_with_decay(), kSteps, nullptr, 0.05);
  const Tensor unclipped = ddp_params(cnn_spec(), sgd_with_decay(), kSteps);
  EXPECT_GT(max_abs_diff(ddp, unclipped), 1e-3);
  const FsdpRun f =
      fsdp_params(cnn_spec(), sgd_with_decay(), kSteps, opts(parallel::ShardingMode::full_shard), 1, 0.05);
  EXPECT_LE(max_abs_diff(f.params, ddp), kTolerance);
  expect_identical_across_ranks(f.params);
}

// Bytes per step (printed; checked against the analytic count): DDP
// all-reduces Psi (wire 2(N-1)/N Psi per rank with a ring), FSDP FULL_SHARD
// gathers twice and reduce-scatters once (wire 3(N-1)/N Psi, less the last
// Block's second gather), both in f32.
TEST(Fsdp, BytesPerStepAgainstTheory) {
  const int n = world().size();
  parallel::CommStats ds;
  (void)ddp_params(cnn_spec(), sgd_with_decay(), 1, &ds);
  auto model = nn::build_model(cnn_spec(), kSample, kClasses);
  const double psi = double(model->flat().numel()) * 4;  // bytes of the flat buffer (DDP's payload)
  for (auto mode : {parallel::ShardingMode::full_shard, parallel::ShardingMode::shard_grad_op}) {
    const FsdpRun f = fsdp_params(cnn_spec(), sgd_with_decay(), 1, opts(mode));
    const double fsdp_wire = double(f.stats.wire_bytes);
    const double ddp_wire = double(ds.bytes) * 2 * (n - 1) / n;
    const double factor = mode == parallel::ShardingMode::full_shard ? 3.0 : 2.0;
    if (world().rank() == 0)
      std::cout << fmt::format(
          "[bytes] {} ranks, CNN (Psi = {} B f32, {} Blocks, padded {} B): DDP payload {} B, wire "
          "{:.0f} B (theory 2(N-1)/N Psi = {:.0f}); FSDP {} gathers {} B + reduce-scatters {} B "
          "payload, wire {:.0f} B (theory {:.0f}(N-1)/N Psi = {:.0f})\n",
          n, psi, f.blocks, f.padded_numel * 4, ds.bytes, ddp_wire, 2 * (n - 1) / double(n) * psi,
          mode == parallel::ShardingMode::full_shard ? "FULL_SHARD" : "SHARD_GRAD_OP", f.stats.allgather_payload_bytes,
          f.stats.reduce_scatter_payload_bytes, fsdp_wire, factor, factor * (n - 1) / n * psi);
    // Exact for what we issue: (N-1)/N of every padded Block gathered or reduce-scattered.
    const int64_t gathers =
        mode == parallel::ShardingMode::full_shard ? 2 * f.padded_numel - f.last_padded : f.padded_numel;
    EXPECT_EQ(f.stats.wire_bytes, (gathers + f.padded_numel) / n * (n - 1) * 4);
    EXPECT_EQ(ds.bytes, int64_t(psi));
  }
}

TEST(Fsdp, MemoryFiguresShrinkWithTheGroup) {
  const int n = world().size();
  auto model = nn::build_model(cnn_spec(), kSample, kClasses);
  const parallel::FsdpMemory m = parallel::fsdp_memory(model->flat(), n, 1, {});
  const parallel::ShardLayout layout(model->flat().blocks(), n);
  EXPECT_EQ(m.param_shard_bytes, layout.shard_numel() * 4);
  EXPECT_EQ(m.persistent_bytes, 3 * layout.shard_numel() * 4);
  EXPECT_EQ(m.ddp_persistent_bytes, 3 * model->flat().numel() * 4);
  // Padding costs at most 16 elements per rank per Block.
  EXPECT_LE(m.param_shard_bytes * n, model->flat().numel() * 4 + int64_t(layout.blocks().size()) * n * 16 * 4);
  if (world().rank() == 0) {
    // The default Fashion-MNIST CNN and MLP, for the report.
    for (const nn::ModelKind kind : {nn::ModelKind::cnn, nn::ModelKind::mlp}) {
      nn::ModelSpec spec;
      spec.kind = kind;
      auto big = nn::build_model(spec, Shape{1, 28, 28}, 10);
      {
        // Bytes per step as issued (exact: the counting is checked above).
        const parallel::ShardLayout l(big->flat().blocks(), 2);
        int64_t padded = 0;
        for (int blk = 0; blk < big->num_blocks(); ++blk) padded += l.padded_numel(blk);
        const int64_t last = l.padded_numel(big->num_blocks() - 1);
        const double psi = double(big->flat().numel()) * 4;
        std::cout << fmt::format(
            "[bytes] default {}, 2 ranks: Psi {} B; DDP wire {:.0f} B (2(N-1)/N Psi); FSDP FULL_SHARD wire {} B "
            "(theory 3(N-1)/N Psi = {:.0f}), SHARD_GRAD_OP {} B (theory 2(N-1)/N Psi = {:.0f})\n",
            kind, int64_t(psi), psi, (3 * padded - last) / 2 * 4, 1.5 * psi, padded * 4, psi);
      }
      for (int w : {2, 4, 8}) {
        const parallel::FsdpMemory b = parallel::fsdp_memory(big->flat(), w, 1, {});
        std::cout << fmt::format(
            "[memory] default {} ({} params), {} ranks, SGD momentum: FSDP persistent {} B (shard {} + grads {} + "
            "opt {}), transient gather {} B + grad buffers {} B; DDP persistent {} B; this implementation holds {} B\n",
            kind, big->flat().parameter_count(), w, b.persistent_bytes, b.param_shard_bytes, b.grad_shard_bytes,
            b.optimizer_shard_bytes, b.gather_buffer_bytes, b.grad_buffer_bytes, b.ddp_persistent_bytes,
            b.implementation_bytes);
      }
    }
  }
}
