// The NCCL communicator on this machine's GPU: all-reduce (sum, avg; f32,
// bf16), reduce-scatter, all-gather and broadcast of device tensors, exact
// values (small integers, exact in bf16 too), stream ordering after the
// compute stream, groups, sub-communicators and the Work timestamps. Runs as
// a world of one rank (MPI singleton) unless started under mpirun; inputs
// depend on the rank so that several ranks check real reductions.
//   GPUCHECK kernel=nccl_<op> dtype=<f32|bf16> relerr=<e> limit=<l> ok=<0|1>
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/mpi_environment.h"

#include "runtime/comm/gpu_backend.h"
#include "runtime/core/error.h"

#if defined(SHARDTRAIN_HAVE_COMM_GPU)
#include "runtime/comm/gpu/nccl_communicator.h"
#include "runtime/comm/gpu/nccl_library.h"
#endif

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>

using namespace shardtrain;
using namespace shardtrain::gpu_test;

#if defined(SHARDTRAIN_HAVE_COMM_GPU)

namespace {

std::unique_ptr<comm::NcclCommunicator> g_comm;  // made once (NCCL set-up takes ~1 s)

// MPI for the whole binary; the communicator goes before MPI_Finalize.
[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new MpiEnvironment([] { g_comm.reset(); }));

comm::NcclCommunicator& world() {
  if (!g_comm) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    comm::CommOptions options;
    options.timeout_s = 60;
    g_comm = comm::NcclCommunicator::make_world(MPI_COMM_WORLD, 0, options);
    const auto& lib = comm::nccl();
    if (rank == 0) std::printf("nccl: version %s from %s\n", lib.version_string().c_str(), lib.path.c_str());
  }
  return *g_comm;
}

// Skips without a GPU or without libnccl.so.2 (reported).
#define ST_REQUIRE_NCCL()                                                   \
  do {                                                                      \
    ST_REQUIRE_GPU();                                                       \
    std::string st_why_nccl_;                                               \
    if (!comm::nccl_available(&st_why_nccl_)) GTEST_SKIP() << st_why_nccl_; \
  } while (0)

// value(i, r): small integers, exact in f32 and bf16 sums over a few ranks.
float value(int64_t i, int r) { return float(i % 7) - 3.0f + float(r); }

Tensor make_host(int64_t n, DType dtype, int r, int64_t offset = 0) {
  Tensor h = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    const float v = value(i + offset, r);
    if (dtype == DType::f32)
      h.f32()[i] = v;
    else if (dtype == DType::bf16)
      h.bf16_data()[i] = to_bf16(v);
    else
      h.i32()[i] = int32_t(v);
  }
  return h;
}

float at(const Tensor& host, int64_t i) {
  if (host.dtype() == DType::f32) return host.f32()[i];
  if (host.dtype() == DType::bf16) return to_f32(host.bf16_data()[i]);
  return float(host.i32()[i]);
}

// max |got - want| / max |want| over the device tensor `got` against want(i).
template <class Want>
double compare(const Tensor& got_device, Want want) {
  const Tensor got = to_host(got_device);
  double num = 0, den = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = at(got, i), w = want(i);
    if (!std::isfinite(g)) return INFINITY;
    num = std::max(num, std::fabs(g - w));
    den = std::max(den, std::fabs(w));
  }
  return den == 0 ? num : num / den;
}

const char* dname(DType t) { return t == DType::f32 ? "f32" : t == DType::bf16 ? "bf16" : "i32"; }

double sum_over_ranks(int64_t i, int n) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += value(i, r);
  return s;
}

class NcclTest : public ::testing::TestWithParam<DType> {};

TEST_P(NcclTest, AllreduceSumAndAvg) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  const DType dt = GetParam();
  const int n = c.size(), r = c.rank();
  const int64_t numel = 1000003;  // odd: no alignment luck
  Tensor t = to_device(make_host(numel, dt, r), gpu());
  comm::WorkPtr w = c.allreduce(t, comm::ReduceOp::sum);
  w->wait();
  EXPECT_EQ(w->algorithm(), "nccl");
  EXPECT_LE(w->started_at(), w->finished_at());
  EXPECT_GT(w->started_at(), 0.0);
  report("nccl_allreduce_sum", dname(dt), compare(t, [&](int64_t i) { return sum_over_ranks(i, n); }), kLimitF32);

  Tensor u = to_device(make_host(numel, dt, r), gpu());
  c.allreduce(u, comm::ReduceOp::avg)->wait();
  report("nccl_allreduce_avg", dname(dt), compare(u, [&](int64_t i) { return sum_over_ranks(i, n) / n; }),
         dt == DType::bf16 ? kLimitBf16 : kLimitF32);
}

TEST_P(NcclTest, ReduceScatter) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  const DType dt = GetParam();
  const int n = c.size(), r = c.rank();
  const int64_t per = 4099;
  Tensor in = to_device(make_host(per * n, dt, r), gpu());
  Tensor out = poisoned({per}, dt);
  c.reduce_scatter(in, out, comm::ReduceOp::sum)->wait();
  report("nccl_reduce_scatter", dname(dt), compare(out, [&](int64_t i) { return sum_over_ranks(i + r * per, n); }),
         kLimitF32);
  // In place: the output is this rank's chunk of the input.
  Tensor in2 = to_device(make_host(per * n, dt, r), gpu());
  Tensor own = in2.view(r * per, {per});
  c.reduce_scatter(in2, own, comm::ReduceOp::sum)->wait();
  report("nccl_reduce_scatter_inplace", dname(dt),
         compare(own, [&](int64_t i) { return sum_over_ranks(i + r * per, n); }), kLimitF32);
}

TEST_P(NcclTest, AllgatherAndBroadcast) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  const DType dt = GetParam();
  const int n = c.size(), r = c.rank();
  const int64_t per = 3001;
  Tensor in = to_device(make_host(per, dt, r), gpu());
  Tensor out = poisoned({per * n}, dt);
  c.allgather(in, out)->wait();
  report("nccl_allgather", dname(dt), compare(out, [&](int64_t i) { return value(i % per, int(i / per)); }), kLimitF32);

  const int root = n - 1;
  Tensor b = to_device(make_host(per, dt, r), gpu());
  c.broadcast(b, root)->wait();
  report("nccl_broadcast", dname(dt), compare(b, [&](int64_t i) { return value(i, root); }), kLimitF32);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NcclTest, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& p) { return std::string(dname(p.param)); });

TEST(Nccl, I32AllgatherAndBroadcast) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  const int n = c.size(), r = c.rank();
  Tensor in = to_device(make_host(17, DType::i32, r), gpu());
  Tensor out = to_device(Tensor::zeros({17 * n}, DType::i32), gpu());
  c.allgather(in, out)->wait();
  EXPECT_EQ(compare(out, [&](int64_t i) { return value(i % 17, int(i / 17)); }), 0.0);
  c.broadcast(in, 0)->wait();
  EXPECT_EQ(compare(in, [&](int64_t i) { return value(i, 0); }), 0.0);
}

// Many collectives issued back to back, each right after a copy on the
// compute stream that produces its input: the comm stream must wait for it.
TEST(Nccl, OrderedAfterComputeStream) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  const int n = c.size(), r = c.rank();
  const int64_t numel = 1 << 20;
  Tensor src = to_device(make_host(numel, DType::f32, r), gpu());
  std::vector<Tensor> bufs;
  std::vector<comm::WorkPtr> works;
  for (int k = 0; k < 32; ++k) {
    bufs.push_back(poisoned({numel}));
    copy_tensor(bufs.back(), src);  // on the compute stream
    works.push_back(c.allreduce(bufs.back(), comm::ReduceOp::sum));
  }
  works.back()->wait();
  for (auto& w : works) EXPECT_TRUE(w->test());  // completed in order
  for (size_t k = 1; k < works.size(); ++k) EXPECT_LE(works[k - 1]->finished_at(), works[k]->finished_at());
  double worst = 0;
  for (auto& b : bufs) worst = std::max(worst, compare(b, [&](int64_t i) { return sum_over_ranks(i, n); }));
  report("nccl_allreduce_ordered", "f32", worst, kLimitF32);
}

TEST(Nccl, GroupOfAllreduces) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<Tensor> bufs;
  std::vector<comm::WorkPtr> works;
  c.begin_group();
  for (int k = 0; k < 8; ++k) {
    bufs.push_back(to_device(make_host(1000 + 37 * k, DType::f32, r), gpu()));
    works.push_back(c.allreduce(bufs.back(), comm::ReduceOp::sum));
  }
  c.end_group();
  for (auto& w : works) w->wait();
  double worst = 0;
  for (auto& b : bufs) worst = std::max(worst, compare(b, [&](int64_t i) { return sum_over_ranks(i, n); }));
  report("nccl_allreduce_group", "f32", worst, kLimitF32);
}

TEST(Nccl, BarrierAndSubCommunicators) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  c.barrier();  // returns once done
  comm::Communicator& node = c.node();
  comm::Communicator& cross = c.cross_node();
  EXPECT_EQ(node.name(), "node");
  EXPECT_EQ(cross.name(), "cross-node");
  EXPECT_EQ(node.size() * cross.size(), c.size());  // the same number of ranks per node here
  Tensor t = to_device(make_host(513, DType::f32, node.rank()), gpu());
  node.allreduce(t, comm::ReduceOp::sum)->wait();
  report("nccl_allreduce_node", "f32", compare(t, [&](int64_t i) { return sum_over_ranks(i, node.size()); }),
         kLimitF32);
  cross.barrier();
}

TEST(Nccl, RejectsHostTensorsAndWrongSizes) {
  ST_REQUIRE_NCCL();
  auto& c = world();
  EXPECT_THROW(c.allreduce(Tensor::zeros({8}), comm::ReduceOp::sum), Error);
  Tensor i32 = to_device(Tensor::zeros({8}, DType::i32), gpu());
  EXPECT_THROW(c.allreduce(i32, comm::ReduceOp::sum), Error);
  Tensor in = to_device(Tensor::zeros({8}), gpu());
  Tensor out = to_device(Tensor::zeros({8 * c.size() + 1}), gpu());
  EXPECT_THROW(c.allgather(in, out), Error);
  EXPECT_THROW(c.broadcast(in, c.size()), Error);
}

}  // namespace

#else  // no GPU backends in this build

TEST(Nccl, NotBuilt) {
  EXPECT_FALSE(comm::gpu_comm_backend_built());
  GTEST_SKIP() << "skipped: no CUDA device (this build has no GPU communication backend)";
}

#endif
