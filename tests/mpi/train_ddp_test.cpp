// DDP under mpirun with 1-4 ranks: the same parameters as one rank training
// on the whole global batch, no_sync accumulation, bf16 gradients, bucket
// batches (groups), model mismatch detection, distributed evaluation.
#include "io/dataset_writer.h"
#include "runtime/comm/communicator.h"
#include "tests/mpi/train_test_util.h"
#include "runtime/core/rng.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/parallel/ddp.h"
#include "runtime/parallel/none_strategy.h"
#include "runtime/train/session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

using namespace shardtrain;
using ::testing::HasSubstr;

namespace {

using namespace train::testing;

struct Trainee {
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<optim::Optimizer> opt;
  Trainee(const nn::ModelSpec& spec, uint64_t seed) {
    model = nn::build_model(spec, kSample, kClasses);
    model->initialize(seed);
    optim::OptimizerConfig oc;
    oc.lr = 0.1f;
    oc.momentum = 0.9f;
    opt = optim::make_optimizer(oc, model->flat().numel(), train::optimizer_ranges(model->flat()));
  }
};

// Trains `steps` steps on rows [begin, end) of each global batch.
void train_steps(Trainee& t, int64_t steps, int64_t begin, int64_t end, int64_t micro_batches, parallel::Ddp* ddp) {
  train::StepBuffers b(kSample, kClasses, end - begin);
  for (int64_t s = 0; s < steps; ++s) {
    load_batch(s, {begin, end}, b);
    parallel::NoneStrategy alone(*t.model);
    train::train_step(*t.model, *t.opt, b, 0.1f, 0.0, kGlobalBatch, micro_batches,
                      ddp ? static_cast<parallel::Strategy&>(*ddp) : alone);
  }
}

}  // namespace

// f32: the all-reduce sums per-rank partial gradients in another order than
// one rank's GEMMs do, so the parameters agree to rounding, not to the bit.
// Tolerance after 6 SGD-momentum steps: 2e-5 absolute (parameters are O(0.1-1)).
constexpr double kTolerance = 2e-5;

TEST(Ddp, MatchesOneRankOnTheWholeGlobalBatch) {
  parallel::DdpOptions o;
  o.first_bucket_mb = 0.0005;  // tiny buckets: several all-reduces per step
  o.bucket_mb = 0.001;
  Trainee dist(cnn_spec(), 5), single(cnn_spec(), 5);
  parallel::Ddp ddp(*dist.model, world(), o);
  EXPECT_GE(ddp.buckets().size(), 2u);
  ddp.broadcast_parameters();
  const Slice s = my_slice();
  train_steps(dist, 6, s.begin, s.end, 1, &ddp);
  train_steps(single, 6, 0, kGlobalBatch, 1, nullptr);
  EXPECT_LE(max_abs_diff(dist.model->flat().params(), single.model->flat().params()), kTolerance);
  expect_identical_across_ranks(dist.model->flat().params());
  const parallel::CommStats stats = ddp.take_stats();
  EXPECT_EQ(stats.collectives, 6 * int64_t(ddp.buckets().size()));
  EXPECT_EQ(stats.bytes, 6 * dist.model->flat().numel() * 4);
}

TEST(Ddp, BroadcastGivesEveryRankRankZerosParameters) {
  Trainee t(cnn_spec(), 100 + uint64_t(world().rank()));  // different init per rank
  Trainee rank0(cnn_spec(), 100);
  parallel::Ddp ddp(*t.model, world(), {});
  ddp.broadcast_parameters();
  EXPECT_EQ(max_abs_diff(t.model->flat().params(), rank0.model->flat().params()), 0.0);
}

TEST(Ddp, NoSyncAccumulationMatchesOneStep) {
  Trainee once(cnn_spec(), 9), accumulated(cnn_spec(), 9);
  parallel::Ddp d1(*once.model, world(), {}), d2(*accumulated.model, world(), {});
  d1.broadcast_parameters();
  d2.broadcast_parameters();
  const Slice s = my_slice();
  train_steps(once, 4, s.begin, s.end, 1, &d1);
  train_steps(accumulated, 4, s.begin, s.end, 2, &d2);
  EXPECT_LE(max_abs_diff(once.model->flat().params(), accumulated.model->flat().params()), kTolerance);
  // no_sync: one reduction per bucket per step, not per micro-batch.
  EXPECT_EQ(d2.take_stats().collectives, 4 * int64_t(d2.buckets().size()));
  expect_identical_across_ranks(accumulated.model->flat().params());
}

// What lets a no_sync micro-batch replay as a CUDA graph
// (hooks_capturable(false)): its backward's hooks launch no collective, and
// skipping them (a replay runs none) leaves the next backward's buckets as
// they would have been.
TEST(Ddp, NoSyncBackwardLaunchesNothingSoItMayReplay) {
  Trainee t(cnn_spec(), 9), ref(cnn_spec(), 9);
  parallel::Ddp d(*t.model, world(), {}), dr(*ref.model, world(), {});
  EXPECT_TRUE(d.hooks_capturable(false));
  EXPECT_FALSE(d.hooks_capturable(true));
  const Slice s = my_slice();
  train::StepBuffers b(kSample, kClasses, s.end - s.begin);
  load_batch(0, s, b);
  const Tensor x = b.x;
  Tensor dlogits = Tensor::zeros({s.end - s.begin, kClasses});
  d.set_sync(false);
  t.model->forward(x, &d);
  t.model->backward(dlogits, false, &d);
  EXPECT_EQ(d.take_stats().collectives, 0);
  // A replayed no_sync micro-batch: the same backward without the hooks.
  t.model->forward(x);
  t.model->backward(dlogits, true);
  d.set_sync(true);
  t.model->forward(x, &d);
  t.model->backward(dlogits, true, &d);
  d.wait_gradients();
  EXPECT_EQ(d.take_stats().collectives, int64_t(d.buckets().size()));
  // The same three backwards, every one with its hooks.
  for (int i = 0; i < 3; ++i) {
    dr.set_sync(i == 2);
    ref.model->forward(x, &dr);
    ref.model->backward(dlogits, i > 0, &dr);
  }
  dr.wait_gradients();
  EXPECT_EQ(max_abs_diff(t.model->flat().grads(), ref.model->flat().grads()), 0.0);
}

TEST(Ddp, Bf16GradientsStayCloseToF32) {
  parallel::DdpOptions bf;
  bf.grad_dtype = DType::bf16;
  Trainee a(cnn_spec(), 4), b(cnn_spec(), 4);
  parallel::Ddp da(*a.model, world(), {}), db(*b.model, world(), bf);
  da.broadcast_parameters();
  db.broadcast_parameters();
  const Slice s = my_slice();
  train_steps(a, 3, s.begin, s.end, 1, &da);
  train_steps(b, 3, s.begin, s.end, 1, &db);
  // bf16 keeps 8 bits of mantissa: gradients within ~0.4%, a few steps of
  // lr 0.1 move parameters by at most ~1e-3 differently.
  EXPECT_LE(max_abs_diff(a.model->flat().params(), b.model->flat().params()), 2e-3);
  EXPECT_EQ(db.take_stats().bytes, 3 * b.model->flat().numel() * 2);
  expect_identical_across_ranks(b.model->flat().params());
}

// Forwards to the world and records which group each all-reduce was issued
// in (0: outside any group), the sizes of the groups closed.
class GroupRecorder final : public comm::Communicator {
 public:
  explicit GroupRecorder(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& name() const override { return inner_.name(); }
  comm::WorkPtr allreduce(const Tensor& t, comm::ReduceOp op) override {
    if (open_)
      ++group_sizes.back();
    else
      group_sizes.push_back(0);  // a lone all-reduce: size 0
    if (++allreduces_ == fail_at) throw Error("all-reduce refused (test)");
    return inner_.allreduce(t, op);
  }
  comm::WorkPtr reduce_scatter(const Tensor& in, const Tensor& out, comm::ReduceOp op) override {
    return inner_.reduce_scatter(in, out, op);
  }
  comm::WorkPtr allgather(const Tensor& in, const Tensor& out) override { return inner_.allgather(in, out); }
  comm::WorkPtr broadcast(const Tensor& t, int root) override { return inner_.broadcast(t, root); }
  comm::WorkPtr barrier() override { return inner_.barrier(); }
  comm::Communicator& node() override { return inner_.node(); }
  comm::Communicator& cross_node() override { return inner_.cross_node(); }
  comm::Communicator& groups(int k, comm::GroupSide side) override { return inner_.groups(k, side); }
  void begin_group() override {
    EXPECT_FALSE(open_) << "a group inside a group";
    open_ = true;
    group_sizes.push_back(0);
  }
  void end_group() override {
    EXPECT_TRUE(open_) << "end_group without begin_group";
    open_ = false;
  }
  bool open() const { return open_; }
  std::vector<int> group_sizes;  // per launch: the group's all-reduces, 0 for one outside a group
  int fail_at = -1;              // the all-reduce (1-based) that throws instead of running

 private:
  comm::Communicator& inner_;
  bool open_ = false;
  int allreduces_ = 0;
};

TEST(Ddp, BucketBatchesLaunchAsGroupsWithTheSameResult) {
  parallel::DdpOptions single, batched;
  single.first_bucket_mb = batched.first_bucket_mb = 0.0005;  // tiny buckets: one per Block
  single.bucket_mb = batched.bucket_mb = 0.001;
  batched.bucket_batch = 2;
  nn::ModelSpec spec;
  spec.hidden = {16, 16, 16, 16};  // 5 Blocks, 5 buckets: groups of 2, 2 and 1
  Trainee a(spec, 6), b(spec, 6);
  GroupRecorder ra(world()), rb(world());
  parallel::Ddp da(*a.model, ra, single), db(*b.model, rb, batched);
  const size_t n = da.buckets().size();
  ASSERT_GE(n, 3u);
  da.broadcast_parameters();
  db.broadcast_parameters();
  const Slice s = my_slice();
  train_steps(a, 3, s.begin, s.end, 1, &da);
  train_steps(b, 3, s.begin, s.end, 1, &db);
  // The same reductions of the same gradients: the same bits.
  EXPECT_EQ(max_abs_diff(a.model->flat().params(), b.model->flat().params()), 0.0);
  expect_identical_across_ranks(b.model->flat().params());
  EXPECT_EQ(ra.group_sizes, std::vector<int>(3 * n, 0));
  // Per step: pairs of buckets in groups, an odd last bucket on its own.
  std::vector<int> per_step(n / 2, 2);
  if (n % 2) per_step.push_back(0);
  std::vector<int> want;
  for (int step = 0; step < 3; ++step) want.insert(want.end(), per_step.begin(), per_step.end());
  EXPECT_EQ(rb.group_sizes, want);
  EXPECT_EQ(db.take_stats().collectives, 3 * int64_t(n));
}

TEST(Ddp, AnErrorInsideABucketBatchClosesTheGroup) {
  parallel::DdpOptions o;
  o.first_bucket_mb = 0.0005;
  o.bucket_mb = 0.001;
  o.bucket_batch = 2;
  nn::ModelSpec spec;
  spec.hidden = {16, 16, 16, 16};
  Trainee t(spec, 6);
  GroupRecorder recorder(world());
  parallel::Ddp ddp(*t.model, recorder, o);
  recorder.fail_at = 2;  // the second all-reduce of the first group (every rank alike)
  const Slice s = my_slice();
  EXPECT_THROW(train_steps(t, 1, s.begin, s.end, 1, &ddp), Error);
  EXPECT_FALSE(recorder.open());
  world().barrier()->wait();  // the first group's one issued all-reduce completed everywhere
}

TEST(Ddp, BucketBatchesWithNoSyncLaunchOnlyAfterTheLastMicroBatch) {
  parallel::DdpOptions o;
  o.first_bucket_mb = 0.0005;
  o.bucket_mb = 0.001;
  o.bucket_batch = 3;
  Trainee once(cnn_spec(), 8), accumulated(cnn_spec(), 8);
  parallel::Ddp d1(*once.model, world(), o), d2(*accumulated.model, world(), o);
  d1.broadcast_parameters();
  d2.broadcast_parameters();
  const Slice s = my_slice();
  train_steps(once, 2, s.begin, s.end, 1, &d1);
  train_steps(accumulated, 2, s.begin, s.end, 2, &d2);
  EXPECT_LE(max_abs_diff(once.model->flat().params(), accumulated.model->flat().params()), kTolerance);
  EXPECT_EQ(d2.take_stats().collectives, 2 * int64_t(d2.buckets().size()));
}

TEST(Ddp, BucketsAreWholeBlocksInReverseOrder) {
  nn::ModelSpec spec;
  spec.hidden = {64, 64, 64};  // blocks of 16.6 KiB, 16.6 KiB, 16.6 KiB, 2.6 KiB
  Trainee t(spec, 1);
  parallel::DdpOptions o;
  o.first_bucket_mb = 0.02;  // the head + one hidden block fit
  o.bucket_mb = 0.04;        // two hidden blocks fit
  parallel::Ddp ddp(*t.model, world(), o);
  const auto& b = ddp.buckets();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].first_block, 2);
  EXPECT_EQ(b[0].last_block, 3);
  EXPECT_EQ(b[1].first_block, 0);
  EXPECT_EQ(b[1].last_block, 1);
  const auto& blocks = t.model->flat().blocks();
  EXPECT_EQ(b[0].offset, blocks[2].offset);
  EXPECT_EQ(b[0].numel, blocks[2].numel + blocks[3].numel);
  EXPECT_EQ(b[1].offset + b[1].numel, b[0].offset);  // contiguous, covering everything
  EXPECT_EQ(b[1].offset, 0);
}

TEST(Ddp, ModelMismatchIsAnErrorOnEveryRankNamingTheRank) {
  if (world().size() == 1) GTEST_SKIP() << "needs 2 or more ranks";
  nn::ModelSpec spec;
  spec.hidden = {world().rank() == world().size() - 1 ? int64_t(33) : int64_t(32)};
  Trainee t(spec, 1);
  parallel::Ddp ddp(*t.model, world(), {});
  try {
    ddp.broadcast_parameters();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the model differs across ranks"));
    EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(world().size() - 1) + " has"));
  }
}

TEST(Ddp, DistributedEvaluationMatchesOneRank) {
  // A 103-sample split (uneven over 2-4 ranks).
  auto& c = world();
  const int64_t n = 103;
  const std::string dir = write_test_split(c, "ddp-eval", n);
  const io::InMemoryDataset data = io::InMemoryDataset::load(dir);
  Trainee t(cnn_spec(), 3);
  const train::EvalResult one = train::evaluate(*t.model, data, 10);
  const train::EvalResult all = train::evaluate(*t.model, data, 10, &c);
  EXPECT_EQ(all.samples, n);
  EXPECT_DOUBLE_EQ(all.accuracy, one.accuracy);  // counts are exact
  EXPECT_NEAR(all.loss, one.loss, 1e-6);         // sums of per-rank f32 partials
  c.barrier()->wait();
  if (c.rank() == 0) std::filesystem::remove_all(dir);
}
