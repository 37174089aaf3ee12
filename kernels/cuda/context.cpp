#include "kernels/cuda/context.h"

#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/op_timer.h"
#include "runtime/core/allocator.h"
#include "runtime/core/device_memory.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

namespace shardtrain::cuda {
namespace {

struct Context {
  int device = -1;
  cudaStream_t compute = nullptr, comm = nullptr, copy = nullptr;
  cublasHandle_t blas = nullptr;
  GemmPrecision precision = GemmPrecision::f32;
  LinearBackend linear = LinearBackend::cublaslt;
  AttentionBackend attention = AttentionBackend::cudnn;
  void* blas_workspace = nullptr;
  std::array<void*, kScratchSlots> scratch{};
  std::array<size_t, kScratchSlots> scratch_bytes{};
  DeviceErrorRecord* error_device = nullptr;  // filled by kernels
  DeviceErrorRecord* error_host = nullptr;    // pinned: its published copy
  unsigned long long* first_bad = nullptr;    // device_first_bad()
};

Context g;
std::mutex g_init_mu;

// CUDA's current device is per thread: every thread that touches the device
// (progress engines, pollers, the I/O thread) selects it once.
void bind_thread() {
  thread_local int bound = -1;
  if (bound != g.device) {
    ST_CUDA_CHECK(cudaSetDevice(g.device));
    bound = g.device;
  }
}

class CudaMemoryOps final : public DeviceMemoryOps {
 public:
  void fill_zero(void* ptr, size_t bytes, Device device) override {
    require(device);
    bind_thread();
    ST_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, g.compute));
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override {
    if (!dst_device.is_cpu()) require(dst_device);
    if (!src_device.is_cpu()) require(src_device);
    bind_thread();
    ST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g.compute));
    // Host memory on either side: wait, so the caller may read the result or
    // reuse its source (a pinned source is read asynchronously otherwise).
    if (dst_device.is_cpu() || src_device.is_cpu()) sync_compute();
  }
  void synchronize(Device device) override {
    require(device);
    sync_compute();
  }
  void copy_input_async(std::span<const HostToDevice> parts, Device device, int slot) override {
    require(device);
    bind_thread();
    InputSlot& in = slots_[size_t(slot)];
    if (in.stop == nullptr) {
      for (InputSlot& each : slots_) {
        ST_CUDA_CHECK(cudaEventCreate(&each.compute_ready));
        ST_CUDA_CHECK(cudaEventCreate(&each.stop));
        ST_CUDA_CHECK(cudaEventCreateWithFlags(&each.device_free, cudaEventDisableTiming));
      }
    }
    harvest_completed();
    // Everything issued to the compute stream so far belongs to the steps
    // up to the previous one, the last to read the previous slot's buffer.
    if (previous_slot_ >= 0) {
      InputSlot& prev = slots_[size_t(previous_slot_)];
      ST_CUDA_CHECK(cudaEventRecord(prev.device_free, g.compute));
      prev.free_recorded = true;
    }
    if (!in.free_recorded) {
      // The slot's first copy: its buffer may be memory the caching
      // allocator handed back while kernels issued earlier still used it.
      ST_CUDA_CHECK(cudaEventRecord(in.device_free, g.compute));
      in.free_recorded = true;
    }
    ST_CUDA_CHECK(cudaStreamWaitEvent(g.copy, in.device_free, 0));
    if (in.pending) harvest(in);  // its copy is long done: the compute stream waited for it
    for (const HostToDevice& p : parts)
      ST_CUDA_CHECK(cudaMemcpyAsync(p.dst, p.src, p.bytes, cudaMemcpyHostToDevice, g.copy));
    ST_CUDA_CHECK(cudaEventRecord(in.stop, g.copy));
    // Where the compute stream starts waiting for the copy: the copy's time
    // past this point is what the step could not hide (StepRecord::h2d_s).
    ST_CUDA_CHECK(cudaEventRecord(in.compute_ready, g.compute));
    ST_CUDA_CHECK(cudaStreamWaitEvent(g.compute, in.stop, 0));
    in.pending = true;
    in.issued = ++issued_;
    previous_slot_ = slot;
  }
  void wait_input_host_free(int slot) override {
    InputSlot& in = slots_[size_t(slot)];
    if (!in.pending) return;
    bind_thread();
    harvest(in);
  }
  double last_input_copy_seconds() override {
    harvest_completed();
    return last_s_;
  }
  void read_back_async(void* dst, const void* src, size_t bytes, Device device) override {
    require(device);
    bind_thread();
    if (read_back_ == nullptr) ST_CUDA_CHECK(cudaEventCreateWithFlags(&read_back_, cudaEventDisableTiming));
    ST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g.compute));
    publish_device_error();  // for wait_read_back to raise
    ST_CUDA_CHECK(cudaEventRecord(read_back_, g.compute));
  }
  void wait_read_back() override {
    if (read_back_ == nullptr) return;
    bind_thread();
    ST_CUDA_CHECK(cudaEventSynchronize(read_back_));
    raise_device_error();
  }

 private:
  // An input slot's copy: where the compute stream began to wait for it and
  // where it ended, and the compute stream's event after the last step that
  // read its device buffer.
  struct InputSlot {
    cudaEvent_t compute_ready = nullptr, stop = nullptr, device_free = nullptr;
    bool pending = false, free_recorded = false;
    uint64_t issued = 0;  // order of the copies, for "the last completed"
  };

  // Waits for the slot's copy and keeps how long the compute stream waited
  // for it (0 when it was done first) when it is the newest harvested.
  void harvest(InputSlot& in) {
    float ms = 0;
    ST_CUDA_CHECK(cudaEventSynchronize(in.stop));
    ST_CUDA_CHECK(cudaEventSynchronize(in.compute_ready));
    ST_CUDA_CHECK(cudaEventElapsedTime(&ms, in.compute_ready, in.stop));
    if (in.issued > last_issued_) {
      last_s_ = std::max(0.0, double(ms) * 1e-3);
      last_issued_ = in.issued;
    }
    in.pending = false;
  }
  void harvest_completed() {
    for (InputSlot& in : slots_)
      if (in.pending && cudaEventQuery(in.stop) == cudaSuccess && cudaEventQuery(in.compute_ready) == cudaSuccess)
        harvest(in);
  }

  std::array<InputSlot, 2> slots_{};
  cudaEvent_t read_back_ = nullptr;  // after the last read_back_async's copy
  int previous_slot_ = -1;
  uint64_t issued_ = 0, last_issued_ = 0;
  double last_s_ = 0;

  static void require(Device d) {
    ST_CHECK(d.kind == DeviceKind::cuda && d.index == g.device, "tensor on {} but this process brought up cuda:{}",
             d.str(), g.device);
  }
};

}  // namespace

void fail(const std::string& message) { throw Error(message); }

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  cudaGetLastError();
  throw Error(fmt::format("CUDA error {} ({}) in {} at {}:{}", int(err), cudaGetErrorString(err), what, file, line));
}

void throw_cublas_error(cublasStatus_t status, const char* what, const char* file, int line) {
  throw Error(fmt::format("cuBLAS error {} ({}) in {} at {}:{}", int(status), cublas_api().GetStatusString(status),
                          what, file, line));
}

GemmPrecision parse_gemm_precision(const std::string& name) {
  if (name == "f32") return GemmPrecision::f32;
  if (name == "tf32") return GemmPrecision::tf32;
  if (name == "bf16") return GemmPrecision::bf16;
  throw Error(fmt::format("GEMM precision \"{}\": expected f32, tf32 or bf16", name));
}

const char* gemm_precision_name(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::f32: return "f32";
    case GemmPrecision::tf32: return "tf32";
    case GemmPrecision::bf16: return "bf16";
  }
  return "?";
}

void init_device(int index) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g.device >= 0) {
    ST_CHECK(g.device == index, "cuda:{} asked for, but this process already uses cuda:{}", index, g.device);
    bind_thread();
    return;
  }
  int count = 0;
  ST_CUDA_CHECK(cudaGetDeviceCount(&count));
  ST_CHECK(index >= 0 && index < count, "cuda:{} asked for, but {} CUDA device(s) are visible", index, count);
  ST_CUDA_CHECK(cudaSetDevice(index));
  ST_CUDA_CHECK(cudaStreamCreateWithFlags(&g.compute, cudaStreamNonBlocking));
  ST_CUDA_CHECK(cudaStreamCreateWithFlags(&g.comm, cudaStreamNonBlocking));
  ST_CUDA_CHECK(cudaStreamCreateWithFlags(&g.copy, cudaStreamNonBlocking));
  ST_CUBLAS_CHECK(cublas_api().Create(&g.blas));
  ST_CUBLAS_CHECK(cublas_api().SetStream(g.blas, g.compute));
  // A workspace of cuBLAS's own it would otherwise allocate as it goes,
  // which a stream being captured into a CUDA graph (graph.h) cannot do.
  constexpr size_t kBlasWorkspace = size_t(32) << 20;  // cuBLAS's recommendation for Hopper
  ST_CUDA_CHECK(cudaMalloc(&g.blas_workspace, kBlasWorkspace));
  ST_CUBLAS_CHECK(cublas_api().SetWorkspace(g.blas, g.blas_workspace, kBlasWorkspace));
  ST_CUDA_CHECK(cudaMalloc(&g.error_device, sizeof(DeviceErrorRecord)));
  ST_CUDA_CHECK(cudaMalloc(&g.first_bad, sizeof(unsigned long long)));
  ST_CUDA_CHECK(cudaMemsetAsync(g.error_device, 0, sizeof(DeviceErrorRecord), g.compute));
  ST_CUDA_CHECK(cudaMemsetAsync(g.first_bad, 0xFF, sizeof(unsigned long long), g.compute));
  ST_CUDA_CHECK(cudaStreamSynchronize(g.compute));
  ST_CUDA_CHECK(cudaHostAlloc(&g.error_host, sizeof(DeviceErrorRecord), cudaHostAllocDefault));
  std::memset(g.error_host, 0, sizeof(DeviceErrorRecord));
  g.device = index;
  register_allocator(Device::cuda(index), &device_allocator());
  register_pinned_host_allocator(&pinned_allocator());
  static CudaMemoryOps ops;
  register_device_memory_ops(&ops);
  register_device_op_timer(&device_op_timer());
}

bool device_initialized() { return g.device >= 0; }

int current_device() {
  ST_CHECK(g.device >= 0, "no CUDA device brought up in this process");
  return g.device;
}

cudaStream_t compute_stream() {
  bind_thread();
  return g.compute;
}
cudaStream_t comm_stream() {
  bind_thread();
  return g.comm;
}
cudaStream_t copy_stream() {
  bind_thread();
  return g.copy;
}
cublasHandle_t cublas() {
  bind_thread();
  return g.blas;
}

void set_gemm_precision(GemmPrecision p) { g.precision = p; }
GemmPrecision gemm_precision() { return g.precision; }

LinearBackend parse_linear_backend(const std::string& name) {
  if (name == "cublaslt") return LinearBackend::cublaslt;
  if (name == "cublas") return LinearBackend::cublas;
  fail("GPU linear backend \"" + name + "\": expected cublaslt or cublas");
}
void set_linear_backend(LinearBackend b) { g.linear = b; }
LinearBackend linear_backend() { return g.linear; }

AttentionBackend parse_attention_backend(const std::string& name) {
  if (name == "cudnn") return AttentionBackend::cudnn;
  if (name == "materialized") return AttentionBackend::materialized;
  if (name == "tiled") return AttentionBackend::tiled;
  fail("GPU attention backend \"" + name + "\": expected cudnn, tiled or materialized");
}
void set_attention_backend(AttentionBackend b) { g.attention = b; }
AttentionBackend attention_backend() { return g.attention; }

void sync_compute() {
  bind_thread();
  publish_device_error();
  ST_CUDA_CHECK(cudaStreamSynchronize(g.compute));
  raise_device_error();
}

DeviceErrorRecord* device_error_record() {
  ST_CHECK(g.device >= 0, "no CUDA device brought up in this process");
  return g.error_device;
}

unsigned long long* device_first_bad() {
  ST_CHECK(g.device >= 0, "no CUDA device brought up in this process");
  return g.first_bad;
}

void publish_device_error() {
  if (g.error_host == nullptr) return;
  ST_CUDA_CHECK(cudaMemcpyAsync(g.error_host, g.error_device, sizeof(DeviceErrorRecord), cudaMemcpyDeviceToHost,
                                compute_stream()));
}

void raise_device_error() {
  if (g.error_host == nullptr) return;
  // A copy published after the host's wait may be writing the record while
  // it is read here: a nonzero kind is only a hint, read whole after a drain.
  if (std::atomic_ref<int>(g.error_host->kind).load(std::memory_order_relaxed) == 0) return;
  bind_thread();
  ST_CUDA_CHECK(cudaStreamSynchronize(g.compute));
  const DeviceErrorRecord record = *g.error_host;
  // Cleared, so the error is raised once and the context stays usable.
  ST_CUDA_CHECK(cudaMemsetAsync(g.error_device, 0, sizeof(DeviceErrorRecord), g.compute));
  ST_CUDA_CHECK(cudaStreamSynchronize(g.compute));
  std::memset(g.error_host, 0, sizeof(DeviceErrorRecord));
  fail(device_error_message(record));
}

std::string device_error_message(const DeviceErrorRecord& r) {
  switch (DeviceErrorKind(r.kind)) {
    case DeviceErrorKind::none: return "no error";
    case DeviceErrorKind::embedding_id:
      // The CPU kernel's message (kernels/cpu/embedding.cpp).
      return fmt::format("embedding: id {} at position {} is outside [0, {})", r.value, r.position, r.limit);
  }
  return fmt::format("device error of unknown kind {}", r.kind);
}

size_t scratch_bytes() {
  size_t total = 0;
  for (const size_t b : g.scratch_bytes) total += b;
  return total;
}

void* scratch(ScratchSlot slot, size_t bytes) {
  const size_t i = size_t(slot);
  if (g.scratch_bytes[i] < bytes) {
    bind_thread();
    // Kernels queued on the compute stream may still read the old buffer:
    // the pool hands it out again only to work queued after them.
    const size_t grown = std::max(bytes, g.scratch_bytes[i] * 2);
    if (g.scratch[i] != nullptr) free_workspace(g.scratch[i]);
    g.scratch[i] = nullptr;
    g.scratch_bytes[i] = 0;
    g.scratch[i] = allocate_workspace(grown);
    g.scratch_bytes[i] = grown;
  }
  return g.scratch[i];
}

}  // namespace shardtrain::cuda
