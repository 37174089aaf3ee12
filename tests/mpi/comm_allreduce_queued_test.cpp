// All-reduces issued back to back without waiting, on buffers of mixed sizes
// (empty to several shared-memory steps), dtypes and ops, some on the same
// buffer twice in a row: the engine runs what is queued behind each other as
// groups (one-shot: their messages in flight together; shared memory: packed
// into common steps, the ranks agreeing on how many each step covers, which
// may differ from how each rank grouped them). Every result must be bit for
// bit what the same all-reduces give issued one at a time, the sums exact,
// and every rank must hold the same bits. Runs under mpirun with 1-4 ranks.
#include "tests/mpi/comm_test_util.h"

namespace shardtrain::comm::testing {
namespace {

struct Issued {
  size_t buffer;  // index into the buffers
  ReduceOp op;
};

// Small integers: every sum (and a sum of sums) is exact in f32 and bf16.
float value(int rank, size_t buffer, int64_t i) { return float(int((i * 7 + rank * 3 + int64_t(buffer)) % 9) - 4); }

struct Run {
  std::vector<Tensor> buffers;
  std::vector<Issued> ops;
};

Run make_run(int rank) {
  const int64_t sizes[] = {1, 7, 0, 1023, 4099, 100, 16384, 70000, 3, 2048};
  Run run;
  for (size_t b = 0; b < 24; ++b) {
    const DType dtype = b % 3 == 2 ? DType::bf16 : DType::f32;
    const int64_t n = sizes[b % std::size(sizes)];
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(rank, b, i);
    run.buffers.push_back(to_tensor(v, dtype));
  }
  for (size_t b = 0; b < run.buffers.size(); ++b) {
    run.ops.push_back({b, b % 4 == 3 ? ReduceOp::avg : ReduceOp::sum});
    if (b % 5 == 1) run.ops.push_back({b, ReduceOp::sum});  // the same buffer again: its input is the result
  }
  return run;
}

void check_queued(const std::string& config) {
  SCOPED_TRACE("config " + config);
  Communicator& c = world(config);
  const int p = c.size();
  Run queued = make_run(c.rank()), alone = make_run(c.rank());

  std::vector<WorkPtr> works;
  for (const Issued& x : queued.ops) works.push_back(c.allreduce(queued.buffers[x.buffer], x.op));
  for (WorkPtr& w : works) w->wait();
  for (const Issued& x : alone.ops) c.allreduce(alone.buffers[x.buffer], x.op)->wait();

  for (size_t b = 0; b < queued.buffers.size(); ++b) {
    SCOPED_TRACE(fmt::format("buffer {} ({} {})", b, queued.buffers[b].numel(), dtype_name(queued.buffers[b].dtype())));
    EXPECT_EQ(hash(queued.buffers[b]), hash(alone.buffers[b])) << "queued and one at a time differ";
    EXPECT_TRUE(same_on_all_ranks(hash(queued.buffers[b]))) << "the ranks' results differ in some bit";
    // Sums only (twice for some): exact.
    bool sums = true;
    int times = 0;
    for (const Issued& x : queued.ops)
      if (x.buffer == b) {
        sums = sums && x.op == ReduceOp::sum;
        ++times;
      }
    if (!sums) continue;
    const std::vector<float> got = to_vector(queued.buffers[b]);
    for (size_t i = 0; i < got.size(); ++i) {
      float want = 0;
      for (int k = 0; k < p; ++k) want += value(k, b, int64_t(i));
      if (times == 2) want *= float(p);
      ASSERT_EQ(got[i], want) << "element " << i;
    }
  }
}

TEST(CommAllreduceQueued, BackToBackEqualsOneAtATime) {
  for (const char* config : {"auto", "shm", "oneshot", "auto-small", "ring"}) check_queued(config);
}

}  // namespace
}  // namespace shardtrain::comm::testing
