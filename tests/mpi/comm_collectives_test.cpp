// Every collective of the MPI communicator, on odd sizes (empty, one element,
// not divisible by the ranks, many pipeline chunks), f32 and bf16, sum and
// avg, under every algorithm forced (one-shot for every op) and under auto, against references each
// rank computes locally from every rank's (reproducible) input. Results must
// also be bit-identical on every rank. Runs under mpirun with 1-4 ranks.
//
// Tolerances: a reduction over p ranks makes p-1 additions, each rounding to
// the dtype (unit roundoff u = 2^-24 for f32, 2^-8 for bf16, whose every hop
// rounds), and an average one more rounding: |result - exact| <= (p+1) u
// sum_k |x_k| (divided by p for an average), exact in double precision.
#include "tests/mpi/comm_test_util.h"

#include <cmath>
#include <cstring>

namespace shardtrain::comm::testing {
namespace {

const char* kAlgorithmConfigs[] = {"auto",         "shm",       "oneshot", "mpi", "ring", "ring-default-chunk",
                                   "hierarchical", "auto-small"};
const DType kReduceDtypes[] = {DType::f32, DType::bf16};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg};

std::string describe(const std::string& config, DType dtype, ReduceOp op, int64_t n) {
  return fmt::format("config {} dtype {} op {} numel {}", config, dtype_name(dtype),
                     op == ReduceOp::sum ? "sum" : "avg", n);
}

// The first element of `got` off the exact reduction of `inputs` at `offset`
// by more than the tolerance, as a message; "" if none.
std::string compare_reduction(const std::vector<float>& got, const std::vector<std::vector<float>>& inputs,
                              int64_t offset, DType dtype, ReduceOp op) {
  const int p = int(inputs.size());
  const double u = roundoff(dtype);
  for (size_t i = 0; i < got.size(); ++i) {
    double exact = 0, magnitude = 0;
    for (int k = 0; k < p; ++k) {
      exact += inputs[size_t(k)][size_t(offset) + i];
      magnitude += std::fabs(inputs[size_t(k)][size_t(offset) + i]);
    }
    if (op == ReduceOp::avg) {
      exact /= p;
      magnitude /= p;
    }
    const double tolerance = (p + 1) * u * magnitude + 1e-30;
    if (!(std::fabs(got[i] - exact) <= tolerance))
      return fmt::format("element {}: {} instead of {} (tolerance {})", i, got[i], exact, tolerance);
  }
  return "";
}

std::string expected_algorithm(const std::string& config, const char* op, int64_t full_bytes, int p) {
  if (p == 1) return "local";
  // Several nodes with several ranks each (emulated nodes, launch/emunodes):
  // auto all-reduces large buffers hierarchically.
  Communicator& w = world(config);
  const bool nodes = w.node().size() >= 2 && w.cross_node().size() >= 2;
  const CommOptions o = options_for(config);
  const std::string name = op;
  // Shared memory when every rank of the world is on one node (one machine
  // here), unless emulated nodes split it.
  const bool shm = o.shared_memory && w.node().size() == p;
  if (shm &&
      (o.allreduce_algorithm == AllreduceAlgorithm::automatic || o.allreduce_algorithm == AllreduceAlgorithm::shm))
    return "shm";
  if (o.allreduce_algorithm == AllreduceAlgorithm::oneshot) return "oneshot";
  if (o.allreduce_algorithm == AllreduceAlgorithm::mpi) return "mpi";
  if (o.allreduce_algorithm == AllreduceAlgorithm::ring) return "ring";
  if (o.allreduce_algorithm == AllreduceAlgorithm::hierarchical) return name == "allreduce" ? "hierarchical" : "ring";
  if (name == "allreduce" && full_bytes * (p - 1) <= o.oneshot_bytes) return "oneshot";
  const int64_t small = name == "allreduce"        ? o.small_message_bytes
                        : name == "reduce_scatter" ? o.reduce_scatter_small_bytes
                                                   : o.allgather_small_bytes;
  if (full_bytes <= small) return "mpi";
  return nodes && name == "allreduce" ? "hierarchical" : "ring";
}

void check_allreduce(const std::string& config, DType dtype, ReduceOp op, int64_t n) {
  SCOPED_TRACE(describe(config, dtype, op, n));
  Communicator& c = world(config);
  const int p = c.size();
  std::vector<std::vector<float>> inputs;
  for (int k = 0; k < p; ++k) inputs.push_back(input(7 + uint64_t(n), k, n, dtype));
  Tensor t = to_tensor(inputs[size_t(c.rank())], dtype);
  WorkPtr w = c.allreduce(t, op);
  w->wait();
  EXPECT_EQ(compare_reduction(to_vector(t), inputs, 0, dtype, op), "");
  EXPECT_TRUE(same_on_all_ranks(hash(t))) << "the ranks' results differ in some bit";
  EXPECT_EQ(w->algorithm(), expected_algorithm(config, "allreduce", int64_t(t.nbytes()), p));
  EXPECT_EQ(w->op(), "allreduce");
  EXPECT_EQ(w->bytes(), int64_t(t.nbytes()));
}

TEST(CommCollectives, AllreduceEveryAlgorithmSizeDtypeOp) {
  for (const char* config : kAlgorithmConfigs)
    for (DType dtype : kReduceDtypes)
      for (ReduceOp op : kOps)
        for (int64_t n : {0, 1, 7, 1023, 4099, 10007}) check_allreduce(config, dtype, op, n);
}

TEST(CommCollectives, AllreduceLargerThanSeveralDefaultChunks) {
  // 300007 f32 = 1.2 MB: several 256 KiB chunks per rank's segment (ring),
  // several shared-memory steps, the one-shot's data as one message.
  for (const char* config : {"auto", "oneshot", "ring-default-chunk"})
    for (DType dtype : kReduceDtypes) check_allreduce(config, dtype, ReduceOp::avg, 300007);
}

TEST(CommCollectives, AllreduceOneshotOnEachSideOfItsMessageCuts) {
  // The one-shot all-reduce cuts [32-byte header | data] into messages of
  // the transport's eager size: 4032 bytes where ranks share a node, 65472
  // where none do (this suite on emulated nodes of one rank:
  // integration.ddp_emulated_nodes_test), and past 128 KiB of data sends
  // the rest whole. Sizes of data just inside and just past each cut.
  for (DType dtype : kReduceDtypes)
    for (int64_t bytes : {4000, 4004, 65440, 65444, 131072, 131076})
      check_allreduce("oneshot", dtype, ReduceOp::avg, bytes / int64_t(dtype_size(dtype)));
}

void check_reduce_scatter(const std::string& config, DType dtype, ReduceOp op, int64_t per_rank, bool aliased) {
  SCOPED_TRACE(describe(config, dtype, op, per_rank) + (aliased ? " aliased" : ""));
  Communicator& c = world(config);
  const int p = c.size(), r = c.rank();
  std::vector<std::vector<float>> inputs;
  for (int k = 0; k < p; ++k) inputs.push_back(input(11 + uint64_t(per_rank), k, p * per_rank, dtype));
  Tensor in = to_tensor(inputs[size_t(r)], dtype);
  Tensor out = aliased ? in.view(r * per_rank, {per_rank}) : Tensor::empty({per_rank}, dtype);
  WorkPtr w = c.reduce_scatter(in, out, op);
  w->wait();
  EXPECT_EQ(compare_reduction(to_vector(out), inputs, r * per_rank, dtype, op), "");
  if (!aliased) {  // the input is only read
    EXPECT_EQ(hash(in), hash(to_tensor(inputs[size_t(r)], dtype)));
  }
  EXPECT_EQ(w->algorithm(), expected_algorithm(config, "reduce_scatter", int64_t(in.nbytes()), p));
}

TEST(CommCollectives, ReduceScatterEveryAlgorithmSizeDtypeOp) {
  for (const char* config : {"auto", "oneshot", "mpi", "ring", "auto-small"})
    for (DType dtype : kReduceDtypes)
      for (ReduceOp op : kOps)
        for (int64_t per_rank : {0, 1, 5, 1000, 100003})
          for (bool aliased : {false, true}) check_reduce_scatter(config, dtype, op, per_rank, aliased);
}

void check_allgather(const std::string& config, DType dtype, int64_t per_rank, bool aliased) {
  SCOPED_TRACE(
      fmt::format("config {} dtype {} per rank {}{}", config, dtype_name(dtype), per_rank, aliased ? " aliased" : ""));
  Communicator& c = world(config);
  const int p = c.size(), r = c.rank();
  auto values = [&](int k) {
    std::vector<float> v = input(13 + uint64_t(per_rank), k, per_rank, dtype);
    if (dtype == DType::i32)
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(v[i] * 1e6f) + k);
    return v;
  };
  Tensor out = Tensor::empty({p * per_rank}, dtype);
  Tensor in = aliased ? out.view(r * per_rank, {per_rank}) : Tensor::empty({per_rank}, dtype);
  const Tensor mine = to_tensor(values(r), dtype);
  if (per_rank > 0) std::memcpy(in.raw(), mine.raw(), mine.nbytes());
  WorkPtr w = c.allgather(in, out);
  w->wait();
  std::vector<float> want;
  for (int k = 0; k < p; ++k) {
    const std::vector<float> v = values(k);
    want.insert(want.end(), v.begin(), v.end());
  }
  EXPECT_EQ(hash(out), hash(to_tensor(want, dtype)));
  EXPECT_TRUE(same_on_all_ranks(hash(out)));
  EXPECT_EQ(w->algorithm(), expected_algorithm(config, "allgather", int64_t(out.nbytes()), p));
}

TEST(CommCollectives, AllgatherEveryAlgorithmSizeDtype) {
  for (const char* config : {"auto", "oneshot", "mpi", "ring", "auto-small"})
    for (DType dtype : {DType::f32, DType::bf16, DType::i32})
      for (int64_t per_rank : {0, 1, 5, 1000, 100003})
        for (bool aliased : {false, true}) check_allgather(config, dtype, per_rank, aliased);
}

TEST(CommCollectives, BroadcastFromEveryRootEveryDtype) {
  Communicator& c = world("auto");
  for (DType dtype : {DType::f32, DType::bf16, DType::i32})
    for (int64_t n : {0, 1, 1023, 100003})
      for (int root = 0; root < c.size(); ++root) {
        SCOPED_TRACE(fmt::format("dtype {} numel {} root {}", dtype_name(dtype), n, root));
        const Tensor want = to_tensor(input(17 + uint64_t(n), root, n, dtype), dtype);
        Tensor t =
            c.rank() == root ? to_tensor(input(17 + uint64_t(n), root, n, dtype), dtype) : Tensor::zeros({n}, dtype);
        WorkPtr w = c.broadcast(t, root);
        w->wait();
        EXPECT_EQ(hash(t), hash(want));
        EXPECT_EQ(w->algorithm(), c.size() == 1 ? "local" : "mpi");
      }
}

TEST(CommCollectives, BarrierCompletes) {
  for (const char* config : {"auto", "ring"}) {
    WorkPtr w = world(config).barrier();
    w->wait();
    EXPECT_TRUE(w->test());
    EXPECT_EQ(w->op(), "barrier");
  }
}

TEST(CommCollectives, BadArgumentsThrowOnTheCallersThread) {
  Communicator& c = world("auto");
  const int p = c.size();
  Tensor ints = Tensor::zeros({4}, DType::i32);
  EXPECT_THROW(c.allreduce(ints, ReduceOp::sum), Error);
  Tensor in = Tensor::zeros({4 * p});
  EXPECT_THROW(c.reduce_scatter(in, Tensor::zeros({3}), ReduceOp::sum), Error);
  EXPECT_THROW(c.reduce_scatter(in, Tensor::zeros({4}, DType::bf16), ReduceOp::sum), Error);
  EXPECT_THROW(c.allgather(Tensor::zeros({4}), Tensor::zeros({4 * p + 1})), Error);
  EXPECT_THROW(c.broadcast(in, p), Error);
  EXPECT_THROW(c.allreduce(Tensor(), ReduceOp::sum), Error);
  // An output overlapping the input other than at this rank's chunk.
  if (p > 1) {
    Tensor whole = Tensor::zeros({4 * p});
    EXPECT_THROW(c.reduce_scatter(whole, whole.view(((c.rank() + 1) % p) * 4, {4}), ReduceOp::sum), Error);
  }
  // Nothing was issued: the communicator still works.
  Tensor ok = Tensor::zeros({8});
  c.allreduce(ok, ReduceOp::sum)->wait();
}

TEST(CommCollectives, BadOptionsAreRejected) {
  CommOptions o;
  EXPECT_FALSE(parse_enum<AllreduceAlgorithm>("tree").has_value());  // the config refuses the name
  o.chunk_bytes = 0;
  EXPECT_THROW(make_mpi_world_communicator(o), Error);
  if (world_size() % 2 == 1 && world_size() > 1) {
    // 2 ranks per node leave an odd world with a smaller last node.
    o = CommOptions{};
    o.allreduce_algorithm = AllreduceAlgorithm::hierarchical;
    o.ranks_per_node = 2;
    EXPECT_THROW(make_mpi_world_communicator(o), Error);
  }
}

}  // namespace
}  // namespace shardtrain::comm::testing
