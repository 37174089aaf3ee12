// The MPI backend with device buffers (comm/gpu/device_mpi_communicator.h):
// all-reduce, all-gather and broadcast of GPU tensors, every rank on device
// 0 (ranks share the one GPU of a test machine), in whichever mode the MPI
// library allows (printed), and host tensors passed straight through. Skips
// without a GPU.
#include "runtime/comm/gpu_backend.h"
#include "runtime/core/tensor.h"

#if defined(SHARDTRAIN_HAVE_COMM_GPU)
#include "kernels/devices.h"
#include "runtime/comm/gpu/device_mpi_communicator.h"
#include "runtime/core/device_memory.h"
#endif

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

using namespace shardtrain;

#if defined(SHARDTRAIN_HAVE_COMM_GPU)

namespace {

#define ST_REQUIRE_GPU_ALL_RANKS()                                               \
  do {                                                                           \
    std::string st_why_;                                                         \
    int st_have_ = cuda_devices(&st_why_).empty() ? 0 : 1, st_all_ = 0;          \
    MPI_Allreduce(&st_have_, &st_all_, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);     \
    if (!st_all_) GTEST_SKIP() << "skipped: no CUDA device (" << st_why_ << ")"; \
    use_cuda_device(0);                                                          \
  } while (0)

float value(int64_t i, int r) { return float(i % 5) + 10.0f * float(r); }

Tensor device_input(int64_t n, int r, DType dtype = DType::f32) {
  Tensor h = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::bf16)
      h.bf16_data()[i] = to_bf16(value(i, r));
    else
      h.f32()[i] = value(i, r);
  }
  return to_device(h, Device::cuda(0));
}

std::vector<float> read(const Tensor& d) {
  Tensor h = to_device(d, Device::cpu());
  std::vector<float> v(size_t(h.numel()));
  for (int64_t i = 0; i < h.numel(); ++i)
    v[size_t(i)] = h.dtype() == DType::bf16 ? to_f32(h.bf16_data()[i]) : h.f32()[i];
  return v;
}

comm::Communicator& world() {
  static std::unique_ptr<comm::Communicator> c = [] {
    comm::CommOptions options;
    options.timeout_s = 60;
    auto w = comm::make_device_mpi_world_communicator(0, options);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::printf("device MPI mode: %s\n", comm::device_mpi_mode(*w).c_str());
    return w;
  }();
  return *c;
}

TEST(DeviceMpi, AllreduceOfDeviceTensors) {
  ST_REQUIRE_GPU_ALL_RANKS();
  auto& c = world();
  const int n = c.size(), r = c.rank();
  for (DType dt : {DType::f32, DType::bf16}) {
    for (comm::ReduceOp op : {comm::ReduceOp::sum, comm::ReduceOp::avg}) {
      Tensor t = device_input(70001, r, dt);
      c.allreduce(t, op)->wait();
      const auto got = read(t);
      for (int64_t i = 0; i < 70001; i += 97) {
        double want = 0;
        for (int q = 0; q < n; ++q) want += value(i, q);
        if (op == comm::ReduceOp::avg) want /= n;
        ASSERT_NEAR(got[size_t(i)], want, dt == DType::bf16 ? 0.02 * std::abs(want) + 0.01 : 1e-4)
            << "element " << i << (dt == DType::bf16 ? " bf16" : " f32");
      }
    }
  }
}

TEST(DeviceMpi, AllgatherAndBroadcastOfDeviceTensors) {
  ST_REQUIRE_GPU_ALL_RANKS();
  auto& c = world();
  const int n = c.size(), r = c.rank();
  const int64_t per = 1234;
  Tensor in = device_input(per, r);
  Tensor out = to_device(Tensor::zeros({per * n}), Device::cuda(0));
  c.allgather(in, out)->wait();
  const auto gathered = read(out);
  for (int64_t i = 0; i < per * n; ++i) ASSERT_EQ(gathered[size_t(i)], value(i % per, int(i / per))) << i;

  Tensor b = device_input(per, r);
  const int root = n - 1;
  c.broadcast(b, root)->wait();
  const auto got = read(b);
  for (int64_t i = 0; i < per; ++i) ASSERT_EQ(got[size_t(i)], value(i, root)) << i;
}

TEST(DeviceMpi, ReduceScatterOfDeviceTensors) {
  ST_REQUIRE_GPU_ALL_RANKS();
  auto& c = world();
  const int n = c.size(), r = c.rank();
  const int64_t per = 777;
  Tensor in = device_input(per * n, r);
  Tensor out = to_device(Tensor::zeros({per}), Device::cuda(0));
  c.reduce_scatter(in, out, comm::ReduceOp::sum)->wait();
  const auto got = read(out);
  for (int64_t i = 0; i < per; ++i) {
    double want = 0;
    for (int q = 0; q < n; ++q) want += value(i + r * per, q);
    ASSERT_EQ(got[size_t(i)], want) << i;
  }
}

TEST(DeviceMpi, HostTensorsPassThroughInOrder) {
  ST_REQUIRE_GPU_ALL_RANKS();
  auto& c = world();
  const int n = c.size();
  // A device collective queued, then a host one right behind it.
  Tensor d = device_input(100000, c.rank());
  Tensor h = Tensor::empty({64});
  for (int64_t i = 0; i < 64; ++i) h.f32()[i] = 1.0f;
  comm::WorkPtr wd = c.allreduce(d, comm::ReduceOp::sum);
  comm::WorkPtr wh = c.allreduce(h, comm::ReduceOp::sum);
  wh->wait();
  wd->wait();
  for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(h.f32()[i], float(n));
  c.barrier()->wait();
}

}  // namespace

#else  // no GPU backends in this build

TEST(DeviceMpi, NotBuilt) { GTEST_SKIP() << "skipped: no CUDA device (this build has no GPU communication backend)"; }

#endif
