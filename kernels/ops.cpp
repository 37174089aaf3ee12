#include "kernels/ops.h"

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/onednn_conv.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/one_tile_attention.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/optimizer_update.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "runtime/core/error.h"
#include "runtime/core/op_timing.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#ifdef SHARDTRAIN_HAVE_CUDA
#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/fused_attention.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/optimizer_update.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#define ST_ON_GPU(op, ...) on_gpu(op, __VA_ARGS__)
#define ST_GPU_ONLY(...) __VA_ARGS__
#else
// Without the CUDA backend no tensor can live on a GPU (no allocator is
// registered), so the check is all there is to do.
#define ST_ON_GPU(op, ...) (on_gpu(op, __VA_ARGS__), false)
#define ST_GPU_ONLY(...) throw Error("unreachable: GPU kernel in a build without CUDA")
#endif

namespace shardtrain::ops {
namespace {

// Every op runs where its tensors live: all defined tensors must share one
// device. True when that device is a GPU (the CUDA kernel runs).
bool on_gpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (first == nullptr) {
      first = t;
    } else if (!(t->device() == first->device())) {
      throw Error(fmt::format("{}: tensors on {} and {}; all must be on one device", op, first->device().str(),
                              t->device().str()));
    }
  }
  const bool gpu = first != nullptr && !first->device().is_cpu();
#ifndef SHARDTRAIN_HAVE_CUDA
  ST_CHECK(!gpu, "{}: tensor on {} but this build has no CUDA backend", op, first->device().str());
#endif
  return gpu;
}

void require_numel(const char* op, const Tensor& t, int64_t n, const char* what) {
  ST_CHECK(t.numel() == n, "{}: {} has {} elements, expected {} (shape {})", op, what, t.numel(), n, t.shape().str());
}

// The fused kernels write one operand while reading another element by
// element: the same memory (allow_same) is fine, a shifted overlap would read
// values already overwritten. Addresses compared as integers (pointers into
// different allocations have no specified order).
void require_no_overlap(const char* op, const Tensor& x, const char* x_what, const Tensor& y, const char* y_what,
                        bool allow_same) {
  const auto xb = reinterpret_cast<uintptr_t>(x.raw()), yb = reinterpret_cast<uintptr_t>(y.raw());
  const bool disjoint = xb + x.nbytes() <= yb || yb + y.nbytes() <= xb;
  const bool same = xb == yb && x.nbytes() == y.nbytes();
  ST_CHECK(disjoint || (allow_same && same), "{}: {} and {} overlap{}", op, x_what, y_what,
           allow_same ? " without being the same tensor" : "");
}

float* opt(const Tensor& t) { return t.defined() ? t.f32() : nullptr; }

// The output-size formulas ((H + 2p - K) / stride + 1) truncate toward zero:
// a window larger than the (padded) input would still give one output.
void check_conv_shape(const char* op, const kernels::Conv2dShape& s) {
  ST_CHECK(s.B >= 0 && s.C > 0 && s.OC > 0 && s.K > 0 && s.stride > 0 && s.pad >= 0 && s.H + 2 * s.pad >= s.K &&
               s.W + 2 * s.pad >= s.K,
           "{}: kernel {} (stride {}, padding {}) does not fit a {}x{} input", op, s.K, s.stride, s.pad, s.H, s.W);
}
void check_pool_shape(const char* op, const kernels::Pool2dShape& s) {
  ST_CHECK(s.B >= 0 && s.C > 0 && s.K > 0 && s.stride > 0 && s.H >= s.K && s.W >= s.K,
           "{}: window {} (stride {}) does not fit a {}x{} input", op, s.K, s.stride, s.H, s.W);
}

// An f32 stand-in for a tensor an f32 kernel reads or writes. Mixed
// precision (ops.h) keeps activations in bf16; where a kernel has no bf16
// form (the CPU's, the GPU's materialized attention) it runs on f32 copies:
// inputs widened (exact), outputs rounded once into the tensor by store().
// An f32 tensor stands for itself. A GPU's copies live in the staging
// scratch slots (`slot` 0-2), so a captured step allocates nothing.
class F32Stand {
 public:
  F32Stand(const char* op, const Tensor& t, bool read, [[maybe_unused]] int slot) : t_(t) {
    if (!t.defined() || t.dtype() == DType::f32) {
      p_ = opt(t);
      return;
    }
    ST_CHECK(t.dtype() == DType::bf16, "{}: a tensor of {} where f32 or bf16 values go", op, dtype_name(t.dtype()));
    staged_ = true;
    if (t.device().is_cpu()) {
      copy_ = Tensor::empty({t.numel()}, DType::f32, Device::cpu());
      p_ = copy_.f32();
      if (read) cpu::bf16_to_f32(p_, t.bf16_data(), t.numel());
      return;
    }
    ST_GPU_ONLY(p_ = static_cast<float*>(cuda::scratch(cuda::ScratchSlot(int(cuda::ScratchSlot::staging_0) + slot),
                                                       size_t(t.numel()) * sizeof(float))));
    if (read) ST_GPU_ONLY(cuda::bf16_to_f32(p_, t.bf16_data(), t.numel()));
  }
  float* get() const { return p_; }
  void store() const {
    if (!staged_) return;
    if (t_.device().is_cpu()) {
      cpu::f32_to_bf16(t_.bf16_data(), p_, t_.numel());
      return;
    }
    ST_GPU_ONLY(cuda::f32_to_bf16(t_.bf16_data(), p_, t_.numel()));
  }

 private:
  Tensor t_, copy_;
  float* p_ = nullptr;
  bool staged_ = false;
};

// An op that works row by row, on the CPU, over chunks of rows: each bf16
// tensor it reads widened into, and each it writes rounded from, an f32
// buffer of the chunk's rows that stays in L2, so that no f32 copy of a
// whole tensor is made (nothing for a memory plan to count, no pages for
// the kernel to fault in). f32 tensors are used where they are. The same
// bits as the op on whole f32 copies, for a kernel whose rows do not depend
// on each other.
class RowChunks {
 public:
  struct Part {
    const Tensor* t;  // [rows, cols], f32 or bf16; undefined: a null pointer
    int64_t cols;
    bool read, write;
    bool widened() const { return t->defined() && t->dtype() == DType::bf16; }
  };
  RowChunks(int64_t rows, std::initializer_list<Part> parts) : rows_(rows), count_(parts.size()) {
    ST_CHECK(count_ <= kMaxParts, "RowChunks: more than {} tensors", kMaxParts);
    std::copy(parts.begin(), parts.end(), parts_.begin());
    for (size_t i = 0; i < count_; ++i)
      if (parts_[i].widened()) widened_cols_ += parts_[i].cols;
    chunk_ = widened_cols_ == 0 ? std::max<int64_t>(rows, 1) : std::max<int64_t>(1, kChunkFloats / widened_cols_);
  }
  // kernel(first row, rows, pointers in the parts' order).
  template <class Kernel>
  void run(Kernel&& kernel) const {
    // A row wider than the budget (a long sequence for RoPE) gets a buffer
    // of its own, freed after the op, rather than one the thread keeps.
    thread_local std::vector<float> kept;
    std::vector<float> own;
    std::vector<float>& buffer = chunk_ * widened_cols_ <= kChunkFloats ? kept : own;
    if (buffer.size() < size_t(chunk_ * widened_cols_)) buffer.resize(size_t(chunk_ * widened_cols_));
    std::array<float*, kMaxParts> p{};
    for (int64_t r0 = 0; r0 < rows_; r0 += chunk_) {
      const int64_t n = std::min(chunk_, rows_ - r0);
      int64_t used = 0;
      for (size_t i = 0; i < count_; ++i) {
        const Part& part = parts_[i];
        if (!part.t->defined()) {
          p[i] = nullptr;
        } else if (!part.widened()) {
          p[i] = part.t->f32() + r0 * part.cols;
        } else {
          p[i] = buffer.data() + used;
          used += n * part.cols;
          if (part.read) cpu::bf16_to_f32(p[i], part.t->bf16_data() + r0 * part.cols, n * part.cols);
        }
      }
      kernel(r0, n, p.data());
      for (size_t i = 0; i < count_; ++i) {
        const Part& part = parts_[i];
        if (part.write && part.widened()) cpu::f32_to_bf16(part.t->bf16_data() + r0 * part.cols, p[i], n * part.cols);
      }
    }
  }

 private:
  // 1 MiB of f32: half of a 2 MiB L2.
  static constexpr int64_t kChunkFloats = int64_t(1) << 18;
  static constexpr size_t kMaxParts = 4;
  int64_t rows_, chunk_ = 1, widened_cols_ = 0;
  size_t count_;
  std::array<Part, kMaxParts> parts_{};  // no allocation per op
};

// A tensor that may hold mixed precision's bf16 activations: f32 or bf16.
bool is_bf16(const char* op, const Tensor& t, const char* what) {
  if (!t.defined()) return false;
  ST_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, "{}: {} holds {}, not f32 or bf16", op, what,
           dtype_name(t.dtype()));
  return t.dtype() == DType::bf16;
}

std::atomic<bool> g_cpu_linear_keeps{false};

// Where the input's copy starts in a kept buffer: after the weight's, 256
// bytes aligned (the layout kernels/cuda/linear.h describes).
int64_t kept_input_offset(int64_t IC, int64_t OC) { return (OC * IC + 127) / 128 * 128; }

}  // namespace

void set_cpu_linear_keeps_bf16(bool keep) { g_cpu_linear_keeps.store(keep, std::memory_order_relaxed); }

bool linear_keeps_bf16(Device device) {
  if (device.is_cpu()) return g_cpu_linear_keeps.load(std::memory_order_relaxed) && cpu::bf16_operand_products();
#ifdef SHARDTRAIN_HAVE_CUDA
  return device.kind == DeviceKind::cuda && cuda::gemm_precision() == cuda::GemmPrecision::bf16;
#else
  return false;
#endif
}

bool cpu_linear_reads_bf16() { return cpu::bf16_operand_products(); }

bool cpu_attention_reads_bf16(int64_t T) { return cpu::one_tile_attention_fits(T); }

int64_t linear_kept_elements(int64_t rows, int64_t IC, int64_t OC, DType in) {
#ifdef SHARDTRAIN_HAVE_CUDA
  return cuda::linear_kept_bf16_elements(rows, IC, OC, in == DType::bf16);
#else
  return in == DType::bf16 ? OC * IC : kept_input_offset(IC, OC) + rows * IC;
#endif
}

namespace {

// A kept-copies buffer as linear_forward and linear_backward take it; on a
// GPU, bf16 activations need one (their GEMMs are the bf16 ones).
void check_kept(const char* fn, const Tensor& kept, bool gpu, int64_t N, int64_t IC, int64_t OC, DType in,
                bool any_bf16) {
  ST_CHECK(!gpu || !any_bf16 || kept.defined(),
           "{}: bf16 activations on a GPU need bf16 GEMMs (runtime.precision = \"bf16\" sets them)", fn);
  if (!kept.defined()) return;
  ST_CHECK(gpu || cpu::bf16_operand_products(),
           "{}: bf16 copies are kept only where the products take bf16 operands (a GPU's bf16 GEMMs, or the CPU's "
           "under runtime.precision = \"bf16\")",
           fn);
  const int64_t need = linear_kept_elements(N, IC, OC, in);
  ST_CHECK(kept.dtype() == DType::bf16 && kept.numel() >= need, "{}: the kept copies need {} bf16 values, got {} {}",
           fn, need, kept.numel(), dtype_name(kept.dtype()));
}

}  // namespace

namespace {

// Where the CPU's linear ops find (or put) the bf16 copies of the weight and
// an f32 input: in `kept` where the layer keeps them between its forward
// and backward, else in this thread's scratch. A bf16 input is its own copy.
struct KeptCopies {
  KeptCopies(const Tensor& kept, const Tensor& in, int64_t N, int64_t IC, int64_t OC) {
    const bool in16 = in.dtype() == DType::bf16;
    bf16* base = nullptr;
    if (kept.defined()) {
      base = kept.bf16_data();
    } else {
      thread_local std::vector<bf16> scratch;
      const auto need = size_t(kept_input_offset(IC, OC) + (in16 ? 0 : N * IC));
      if (scratch.size() < need) scratch.resize(need);
      base = scratch.data();
    }
    weight = base;
    input = in16 ? in.bf16_data() : base + kept_input_offset(IC, OC);
  }
  bf16* weight = nullptr;
  bf16* input = nullptr;
};

// linear_forward, and with `pre` linear_gelu_forward.
void linear_forward_impl(const char* fn, const Tensor& out, const Tensor& pre, const Tensor& in, const Tensor& weight,
                         const Tensor& bias, const Tensor& keep, bool keep_has_weight) {
  const bool gpu = ST_ON_GPU(fn, {&out, &pre, &in, &weight, &bias, &keep});
  const OpScope timed(OpClass::linear, gpu);
  const int64_t OC = weight.dim(0), IC = weight.dim(1), N = in.numel() / IC;
  require_numel(fn, in, N * IC, "input");
  require_numel(fn, out, N * OC, "output");
  if (pre.defined()) require_numel(fn, pre, N * OC, "GELU input");
  if (bias.defined()) require_numel(fn, bias, OC, "bias");
  const bool in16 = is_bf16(fn, in, "the input"), out16 = is_bf16(fn, out, "the output");
  ST_CHECK(!pre.defined() || pre.dtype() == out.dtype(), "{}: the GELU's input and output differ in type ({} and {})",
           fn, dtype_name(pre.dtype()), dtype_name(out.dtype()));
  check_kept(fn, keep, gpu, N, IC, OC, in.dtype(), in16 || out16);
  ST_CHECK(!keep_has_weight || keep.defined(), "{}: no kept buffer to hold the weight's copy", fn);
  if (gpu) {
    ST_GPU_ONLY(cuda::linear_forward(out.raw(), in.raw(), weight.f32(), opt(bias), N, IC, OC,
                                     {keep.defined() ? keep.raw() : nullptr, pre.defined() ? pre.raw() : nullptr, in16,
                                      out16, false, false, keep_has_weight}));
    return;
  }
  if (cpu::bf16_operand_products()) {
    // The products take bf16 operands: the input is rounded once (or read
    // as the bf16 it is), with no f32 copy of it for gemm() to round again;
    // the copies go to `keep` for the backward where it is given.
    const KeptCopies c(keep, in, N, IC, OC);
    if (!keep_has_weight) cpu::f32_to_bf16(c.weight, weight.f32(), OC * IC);
    if (!in16) cpu::f32_to_bf16(c.input, in.f32(), N * IC);
    // A bf16 output (and the GELU's input) a chunk of rows at a time.
    RowChunks(N, {{&pre, OC, false, true}, {&out, OC, false, true}}).run([&](int64_t r0, int64_t n, float* const* p) {
      cpu::linear_forward_bf16(pre.defined() ? p[0] : p[1], c.input + r0 * IC, c.weight, opt(bias), n, IC, OC);
      if (pre.defined()) cpu::gelu_forward(p[1], p[0], n * OC);
    });
    return;
  }
  const F32Stand x(fn, in, true, 0), y(fn, out, false, 1), p(fn, pre, false, 2);
  if (!pre.defined()) {
    cpu::linear_forward(y.get(), x.get(), weight.f32(), opt(bias), N, IC, OC);
  } else {
    cpu::linear_forward(p.get(), x.get(), weight.f32(), opt(bias), N, IC, OC);
    cpu::gelu_forward(y.get(), p.get(), N * OC);
  }
  y.store();
  p.store();
}

// linear_backward, and with `pre` linear_backward_through_gelu.
void linear_backward_impl(const char* fn, const Tensor& din, const Tensor& dweight, const Tensor& dbias,
                          const Tensor& dout, const Tensor& in, const Tensor& weight, const Tensor& pre,
                          bool accumulate, const Tensor& kept) {
  const bool gpu = ST_ON_GPU(fn, {&din, &dweight, &dbias, &dout, &in, &weight, &pre, &kept});
  const OpScope timed(OpClass::linear, gpu);
  const int64_t OC = weight.dim(0), IC = weight.dim(1), N = in.numel() / IC;
  require_numel(fn, dout, N * OC, "output gradient");
  if (din.defined()) require_numel(fn, din, N * IC, "input gradient");
  if (pre.defined()) require_numel(fn, pre, N * IC, "GELU input");
  require_numel(fn, dweight, OC * IC, "weight gradient");
  if (dbias.defined()) require_numel(fn, dbias, OC, "bias gradient");
  const bool in16 = is_bf16(fn, in, "the input"), dout16 = is_bf16(fn, dout, "the output gradient");
  const bool din16 = is_bf16(fn, din, "the input gradient");
  ST_CHECK(!pre.defined() || pre.dtype() == din.dtype(),
           "{}: the GELU's input and its gradient differ in type ({} and {})", fn, dtype_name(pre.dtype()),
           dtype_name(din.dtype()));
  check_kept(fn, kept, gpu, N, IC, OC, in.dtype(), in16 || dout16 || din16);
  if (gpu) {
    ST_GPU_ONLY(cuda::linear_backward(
        din.defined() ? din.raw() : nullptr, dweight.f32(), opt(dbias), dout.raw(), in.raw(), weight.f32(), N, IC, OC,
        accumulate,
        {kept.defined() ? kept.raw() : nullptr, pre.defined() ? pre.raw() : nullptr, in16, false, dout16, din16}));
    return;
  }
  if (cpu::bf16_operand_products()) {
    // The output's gradient rounded once for both products (or read as the
    // bf16 it is), the input as in the forward; the bias gradient sums the
    // gradient's own values.
    thread_local std::vector<bf16> g16;
    if (!dout16) cpu::pack_bf16(g16, dout.f32(), N, OC, OC);
    const KeptCopies c(kept, in, N, IC, OC);
    if (!kept.defined()) {
      cpu::f32_to_bf16(c.weight, weight.f32(), OC * IC);
      if (!in16) cpu::f32_to_bf16(c.input, in.f32(), N * IC);
    }
    const bf16* g = dout16 ? dout.bf16_data() : g16.data();
    cpu::linear_backward_bf16(nullptr, dweight.f32(), g, c.input, c.weight, N, IC, OC, accumulate);
    if (dbias.defined() && dout16) cpu::bias_gradient(dbias.f32(), dout.bf16_data(), N, OC, accumulate);
    if (dbias.defined() && !dout16) cpu::bias_gradient(dbias.f32(), dout.f32(), N, OC, accumulate);
    if (!din.defined()) return;
    // The input's gradient (through the GELU) a chunk of rows at a time.
    RowChunks(N, {{&pre, IC, true, false}, {&din, IC, false, true}}).run([&](int64_t r0, int64_t n, float* const* p) {
      cpu::gemm_bf16(false, false, n, IC, OC, 1.0f, g + r0 * OC, OC, c.weight, IC, 0.0f, p[1], IC);
      if (pre.defined()) cpu::gelu_backward(p[1], p[1], p[0], n * IC);
    });
    return;
  }
  const F32Stand x(fn, in, true, 0), g(fn, dout, true, 1), p(fn, pre, true, 2), dx(fn, din, false, 0);
  cpu::linear_backward(dx.get(), dweight.f32(), opt(dbias), g.get(), x.get(), weight.f32(), N, IC, OC, accumulate);
  if (pre.defined() && din.defined()) cpu::gelu_backward(dx.get(), dx.get(), p.get(), N * IC);
  dx.store();
}

}  // namespace

void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& keep,
                    bool keep_has_weight) {
  linear_forward_impl("linear_forward", out, Tensor(), in, weight, bias, keep, keep_has_weight);
}

void linear_gelu_forward(const Tensor& out, const Tensor& pre, const Tensor& in, const Tensor& weight,
                         const Tensor& bias, const Tensor& keep, bool keep_has_weight) {
  ST_CHECK(pre.defined(), "linear_gelu_forward: no tensor for the GELU's input");
  linear_forward_impl("linear_gelu_forward", out, pre, in, weight, bias, keep, keep_has_weight);
}

void linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& in, const Tensor& weight, bool accumulate, const Tensor& kept) {
  linear_backward_impl("linear_backward", din, dweight, dbias, dout, in, weight, Tensor(), accumulate, kept);
}

void linear_backward_through_gelu(const Tensor& dpre, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                  const Tensor& in, const Tensor& weight, const Tensor& pre, bool accumulate,
                                  const Tensor& kept) {
  ST_CHECK(pre.defined() && dpre.defined(), "linear_backward_through_gelu: needs the GELU's input and its gradient");
  linear_backward_impl("linear_backward_through_gelu", dpre, dweight, dbias, dout, in, weight, pre, accumulate, kept);
}

void relu_forward(const Tensor& out, const Tensor& in) {
  const bool gpu = ST_ON_GPU("relu_forward", {&out, &in});
  const OpScope timed(OpClass::elementwise, gpu);
  require_numel("relu_forward", out, in.numel(), "output");
  if (gpu) {
    ST_GPU_ONLY(cuda::relu_forward(out.f32(), in.f32(), in.numel()));
    return;
  }
  cpu::relu_forward(out.f32(), in.f32(), in.numel());
}

void relu_backward(const Tensor& din, const Tensor& dout, const Tensor& out) {
  const bool gpu = ST_ON_GPU("relu_backward", {&din, &dout, &out});
  const OpScope timed(OpClass::elementwise, gpu);
  require_numel("relu_backward", din, out.numel(), "input gradient");
  require_numel("relu_backward", dout, out.numel(), "output gradient");
  if (gpu) {
    ST_GPU_ONLY(cuda::relu_backward(din.f32(), dout.f32(), out.f32(), out.numel()));
    return;
  }
  cpu::relu_backward(din.f32(), dout.f32(), out.f32(), out.numel());
}

void gelu_forward(const Tensor& out, const Tensor& in) {
  const bool gpu = ST_ON_GPU("gelu_forward", {&out, &in});
  const OpScope timed(OpClass::elementwise, gpu);
  require_numel("gelu_forward", out, in.numel(), "output");
  if (gpu) {
    ST_GPU_ONLY(cuda::gelu_forward(out.f32(), in.f32(), in.numel()));
    return;
  }
  cpu::gelu_forward(out.f32(), in.f32(), in.numel());
}

void gelu_backward(const Tensor& din, const Tensor& dout, const Tensor& in) {
  const bool gpu = ST_ON_GPU("gelu_backward", {&din, &dout, &in});
  const OpScope timed(OpClass::elementwise, gpu);
  require_numel("gelu_backward", din, in.numel(), "input gradient");
  require_numel("gelu_backward", dout, in.numel(), "output gradient");
  if (gpu) {
    ST_GPU_ONLY(cuda::gelu_backward(din.f32(), dout.f32(), in.f32(), in.numel()));
    return;
  }
  cpu::gelu_backward(din.f32(), dout.f32(), in.f32(), in.numel());
}

void conv2d_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& col,
                    const kernels::Conv2dShape& s) {
  const bool gpu = ST_ON_GPU("conv2d_forward", {&out, &in, &weight, &bias, &col});
  const OpScope timed(OpClass::conv, gpu);
  check_conv_shape("conv2d_forward", s);
  require_numel("conv2d_forward", in, s.B * s.C * s.H * s.W, "input");
  require_numel("conv2d_forward", out, s.B * s.OC * s.OH() * s.OW(), "output");
  require_numel("conv2d_forward", weight, s.OC * s.C * s.K * s.K, "weight");
  if (bias.defined()) require_numel("conv2d_forward", bias, s.OC, "bias");
  ST_CHECK(col.numel() >= s.col_floats(), "conv2d_forward: column workspace too small");
  if (gpu) {
    ST_GPU_ONLY(cuda::conv2d_forward(out.f32(), in.f32(), weight.f32(), opt(bias), col.f32(), s));
    return;
  }
  cpu::conv2d_forward(out.f32(), in.f32(), weight.f32(), opt(bias), col.f32(), s);
}

void conv2d_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& in, const Tensor& weight, const Tensor& col, const kernels::Conv2dShape& s,
                     bool accumulate) {
  const bool gpu = ST_ON_GPU("conv2d_backward", {&din, &dweight, &dbias, &dout, &in, &weight, &col});
  const OpScope timed(OpClass::conv, gpu);
  check_conv_shape("conv2d_backward", s);
  require_numel("conv2d_backward", in, s.B * s.C * s.H * s.W, "input");
  require_numel("conv2d_backward", weight, s.OC * s.C * s.K * s.K, "weight");
  require_numel("conv2d_backward", dweight, s.OC * s.C * s.K * s.K, "weight gradient");
  if (dbias.defined()) require_numel("conv2d_backward", dbias, s.OC, "bias gradient");
  require_numel("conv2d_backward", dout, s.B * s.OC * s.OH() * s.OW(), "output gradient");
  if (din.defined()) require_numel("conv2d_backward", din, s.B * s.C * s.H * s.W, "input gradient");
  ST_CHECK(col.numel() >= s.col_floats(), "conv2d_backward: column workspace too small");
  if (gpu) {
    ST_GPU_ONLY(cuda::conv2d_backward(opt(din), dweight.f32(), opt(dbias), dout.f32(), in.f32(), weight.f32(),
                                      col.f32(), s, accumulate));
    return;
  }
  cpu::conv2d_backward(opt(din), dweight.f32(), opt(dbias), dout.f32(), in.f32(), weight.f32(), col.f32(), s,
                       accumulate);
}

void maxpool2d_forward(const Tensor& out, const Tensor& argmax, const Tensor& in, const kernels::Pool2dShape& s) {
  const bool gpu = ST_ON_GPU("maxpool2d_forward", {&out, &argmax, &in});
  const OpScope timed(OpClass::pool, gpu);
  check_pool_shape("maxpool2d_forward", s);
  require_numel("maxpool2d_forward", in, s.B * s.C * s.H * s.W, "input");
  require_numel("maxpool2d_forward", out, s.B * s.C * s.OH() * s.OW(), "output");
  require_numel("maxpool2d_forward", argmax, out.numel(), "arg-max indices");
  if (gpu) {
    ST_GPU_ONLY(cuda::maxpool2d_forward(out.f32(), argmax.i32(), in.f32(), s));
    return;
  }
  cpu::maxpool2d_forward(out.f32(), argmax.i32(), in.f32(), s);
}

void maxpool2d_backward(const Tensor& din, const Tensor& dout, const Tensor& argmax, const kernels::Pool2dShape& s) {
  const bool gpu = ST_ON_GPU("maxpool2d_backward", {&din, &dout, &argmax});
  const OpScope timed(OpClass::pool, gpu);
  check_pool_shape("maxpool2d_backward", s);
  require_numel("maxpool2d_backward", din, s.B * s.C * s.H * s.W, "input gradient");
  require_numel("maxpool2d_backward", dout, s.B * s.C * s.OH() * s.OW(), "output gradient");
  require_numel("maxpool2d_backward", argmax, dout.numel(), "arg-max indices");
  if (gpu) {
    ST_GPU_ONLY(cuda::maxpool2d_backward(din.f32(), dout.f32(), argmax.i32(), s));
    return;
  }
  cpu::maxpool2d_backward(din.f32(), dout.f32(), argmax.i32(), s);
}

bool conv2d_maxpool_fuses(Device device, const kernels::Conv2dShape& cs, const kernels::Pool2dShape& ps) {
  return device.is_cpu() && ps.K == 2 && ps.stride == 2 && ps.B == cs.B && ps.C == cs.OC && ps.H == cs.OH() &&
         ps.W == cs.OW() && cs.B > 0 && cpu::onednn_conv_pools(cs);
}

void conv2d_maxpool_forward(const Tensor& pooled, const Tensor& argmax, const Tensor& conv_out, const Tensor& in,
                            const Tensor& weight, const Tensor& bias, const Tensor& col, const kernels::Conv2dShape& cs,
                            const kernels::Pool2dShape& ps, bool relu) {
  const char* fn = "conv2d_maxpool_forward";
  ST_CHECK(ps.B == cs.B && ps.C == cs.OC && ps.H == cs.OH() && ps.W == cs.OW(),
           "{}: the pool's input [{}, {}, {}, {}] is not the convolution's output [{}, {}, {}, {}]", fn, ps.B, ps.C,
           ps.H, ps.W, cs.B, cs.OC, cs.OH(), cs.OW());
  if (!conv2d_maxpool_fuses(in.device(), cs, ps)) {
    ST_CHECK(!relu, "{}: the ReLU is made with the pool only where the pool reads the convolution's layout", fn);
    const Tensor out =
        conv_out.defined() ? conv_out : Tensor::empty({cs.B, cs.OC, cs.OH(), cs.OW()}, DType::f32, in.device());
    conv2d_forward(out, in, weight, bias, col, cs);
    maxpool2d_forward(pooled, argmax, out, ps);
    return;
  }
  const OpScope timed(OpClass::conv, false);
  check_conv_shape(fn, cs);
  check_pool_shape(fn, ps);
  require_numel(fn, in, cs.B * cs.C * cs.H * cs.W, "input");
  require_numel(fn, weight, cs.OC * cs.C * cs.K * cs.K, "weight");
  if (bias.defined()) require_numel(fn, bias, cs.OC, "bias");
  require_numel(fn, pooled, ps.B * ps.C * ps.OH() * ps.OW(), "pooled output");
  require_numel(fn, argmax, pooled.numel(), "arg-max indices");
  cpu::onednn_conv_maxpool_forward(pooled.f32(), argmax.i32(), in.f32(), weight.f32(), opt(bias), cs, relu);
}

namespace {

// The logits' type for the loss kernels: f32, or bf16 (mixed precision's
// head), with dlogits (often the logits themselves) of the same type.
bool logits_bf16(const char* op, const Tensor& logits, const Tensor& dlogits) {
  const bool bf16 = is_bf16(op, logits, "the logits");
  ST_CHECK(!dlogits.defined() || dlogits.dtype() == logits.dtype(), "{}: logits of {} and their gradient of {}", op,
           dtype_name(logits.dtype()), dtype_name(dlogits.dtype()));
  return bf16;
}

}  // namespace

double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const int32_t* labels, float scale) {
  const char* op = "softmax_xent";
  const bool gpu = ST_ON_GPU(op, {&dlogits, &logits});
  const OpScope timed(OpClass::loss, gpu);
  require_numel(op, dlogits, logits.numel(), "logit gradient");
  const int64_t N = logits.shape().rows(), C = logits.shape().cols();
  [[maybe_unused]] const bool bf16 = logits_bf16(op, logits, dlogits);
  if (gpu) {
    ST_GPU_ONLY(return cuda::softmax_xent_fused(dlogits.raw(), logits.raw(), labels, N, C, scale, bf16));
  }
  const F32Stand x(op, logits, true, 0), d(op, dlogits, false, 1);
  const double loss = cpu::softmax_xent_fused(d.get(), x.get(), labels, N, C, scale);
  d.store();
  return loss;
}

void softmax_xent_fused_rows(const Tensor& dlogits, const Tensor& logits, const Tensor& labels, float scale,
                             const Tensor& row_loss) {
  const char* op = "softmax_xent_rows";
  const bool gpu = ST_ON_GPU(op, {&dlogits, &logits, &labels, &row_loss});
  const OpScope timed(OpClass::loss, gpu);
  const int64_t N = logits.shape().rows(), C = logits.shape().cols();
  require_numel(op, dlogits, logits.numel(), "logit gradient");
  require_numel(op, labels, N, "labels");
  require_numel(op, row_loss, N, "row losses");
  ST_CHECK(labels.dtype() == DType::i32 && row_loss.dtype() == DType::f32,
           "softmax_xent_rows: labels must be i32 and row losses f32 (got {} and {})", dtype_name(labels.dtype()),
           dtype_name(row_loss.dtype()));
  [[maybe_unused]] const bool bf16 = logits_bf16(op, logits, dlogits);
  if (gpu) {
    ST_GPU_ONLY(
        cuda::softmax_xent_fused_rows(dlogits.raw(), logits.raw(), labels.i32(), N, C, scale, row_loss.f32(), bf16));
    return;
  }
  const F32Stand x(op, logits, true, 0), d(op, dlogits, false, 1);
  cpu::softmax_xent_fused_rows(d.get(), x.get(), labels.i32(), N, C, scale, row_loss.f32());
  d.store();
}

void check_labels(const int32_t* labels, int64_t n, int64_t classes) { cpu::check_labels(labels, n, classes); }
void check_token_ids(const int32_t* ids, int64_t n, int64_t vocab) { cpu::check_embedding_ids(ids, n, vocab); }

double softmax_xent_forward(const Tensor& logits, const int32_t* labels) {
  const bool gpu = ST_ON_GPU("softmax_xent", {&logits});
  const OpScope timed(OpClass::loss, gpu);
  const int64_t N = logits.shape().rows(), C = logits.shape().cols();
  [[maybe_unused]] const bool bf16 = logits_bf16("softmax_xent", logits, Tensor());
  if (gpu) {
    ST_GPU_ONLY(return cuda::softmax_xent_forward(logits.raw(), labels, N, C, bf16));
  }
  const F32Stand x("softmax_xent", logits, true, 0);
  return cpu::softmax_xent_forward(x.get(), labels, N, C, nullptr);
}

int64_t count_correct(const Tensor& logits, const int32_t* labels) {
  const bool gpu = ST_ON_GPU("count_correct", {&logits});
  const OpScope timed(OpClass::loss, gpu);
  const int64_t N = logits.shape().rows(), C = logits.shape().cols();
  [[maybe_unused]] const bool bf16 = logits_bf16("count_correct", logits, Tensor());
  if (gpu) {
    ST_GPU_ONLY(return cuda::count_correct(logits.raw(), labels, N, C, bf16));
  }
  const F32Stand x("count_correct", logits, true, 0);
  return cpu::count_correct(x.get(), labels, N, C);
}

namespace {

// The step's scalars of an update: `floats` f32 values on its device.
void require_step(const char* op, const Tensor& step, int floats) {
  ST_CHECK(step.defined() && step.dtype() == DType::f32 && step.numel() >= floats,
           "{}: the step's scalars must be {} f32 values on the parameters' device", op, floats);
}

}  // namespace

void store_floats(const Tensor& x, std::span<const float> values) {
  const bool gpu = ST_ON_GPU("store_floats", {&x});
  const OpScope timed(OpClass::copy, gpu);
  ST_CHECK(x.dtype() == DType::f32 && x.numel() >= int64_t(values.size()),
           "store_floats: {} values into a tensor of {} {} elements", values.size(), x.numel(), dtype_name(x.dtype()));
  if (gpu) {
    ST_GPU_ONLY(cuda::store_floats(x.f32(), values.data(), int(values.size())));
    return;
  }
  std::copy(values.begin(), values.end(), x.f32());
}

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const kernels::SgdParams& hp,
                const Tensor& step) {
  const bool gpu = ST_ON_GPU("sgd_update", {&param, &grad, &momentum_buf, &step});
  const OpScope timed(OpClass::optimizer, gpu);
  require_numel("sgd_update", grad, param.numel(), "gradient");
  if (momentum_buf.defined()) require_numel("sgd_update", momentum_buf, param.numel(), "momentum");
  require_step("sgd_update", step, kernels::SgdStep::kFloats);
  if (gpu) {
    ST_GPU_ONLY(cuda::sgd_update(param.f32(), grad.f32(), opt(momentum_buf), param.numel(), hp, step.f32()));
    return;
  }
  const float* s = step.f32();
  cpu::sgd_update(param.f32(), grad.f32(), opt(momentum_buf), param.numel(), hp, kernels::SgdStep{s[0], s[1]});
}

void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const kernels::AdamWParams& hp, const Tensor& step) {
  const bool gpu = ST_ON_GPU("adamw_update", {&param, &grad, &m, &v, &step});
  const OpScope timed(OpClass::optimizer, gpu);
  require_numel("adamw_update", grad, param.numel(), "gradient");
  require_numel("adamw_update", m, param.numel(), "first moment");
  require_numel("adamw_update", v, param.numel(), "second moment");
  require_step("adamw_update", step, kernels::AdamWStep::kFloats);
  if (gpu) {
    ST_GPU_ONLY(cuda::adamw_update(param.f32(), grad.f32(), m.f32(), v.f32(), param.numel(), hp, step.f32()));
    return;
  }
  const float* s = step.f32();
  cpu::adamw_update(param.f32(), grad.f32(), m.f32(), v.f32(), param.numel(), hp, kernels::AdamWStep{s[0], s[1], s[2]});
}

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, float eps) {
  const bool gpu = ST_ON_GPU("layernorm_forward", {&out, &mean, &rstd, &in, &weight, &bias});
  const OpScope timed(OpClass::norm, gpu);
  const int64_t C = weight.numel(), N = in.numel() / C;
  require_numel("layernorm_forward", in, N * C, "input");
  require_numel("layernorm_forward", out, N * C, "output");
  require_numel("layernorm_forward", bias, C, "bias");
  ST_CHECK(mean.numel() >= N && rstd.numel() >= N, "layernorm_forward: mean/rstd hold fewer than {} rows", N);
  [[maybe_unused]] const bool out16 = is_bf16("layernorm_forward", out, "the output");
  if (gpu) {
    ST_GPU_ONLY(cuda::layernorm_forward(out.raw(), out16, mean.f32(), rstd.f32(), in.f32(), weight.f32(), bias.f32(), N,
                                        C, eps));
    return;
  }
  RowChunks(N, {{&out, C, false, true}}).run([&](int64_t r0, int64_t n, float* const* p) {
    cpu::layernorm_forward(p[0], mean.f32() + r0, rstd.f32() + r0, in.f32() + r0 * C, weight.f32(), bias.f32(), n, C,
                           eps);
  });
}

void layernorm_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& in, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                        bool accumulate) {
  const bool gpu = ST_ON_GPU("layernorm_backward", {&din, &dweight, &dbias, &dout, &in, &weight, &mean, &rstd});
  const OpScope timed(OpClass::norm, gpu);
  ST_CHECK(din.defined(), "layernorm_backward: the input gradient is required");
  const int64_t C = weight.numel(), N = in.numel() / C;
  require_numel("layernorm_backward", din, N * C, "input gradient");
  require_numel("layernorm_backward", dout, N * C, "output gradient");
  require_numel("layernorm_backward", dweight, C, "weight gradient");
  require_numel("layernorm_backward", dbias, C, "bias gradient");
  ST_CHECK(mean.numel() >= N && rstd.numel() >= N, "layernorm_backward: mean/rstd hold fewer than {} rows", N);
  if (gpu) {
    ST_GPU_ONLY(cuda::layernorm_backward(din.f32(), dweight.f32(), dbias.f32(), dout.f32(), in.f32(), weight.f32(),
                                         mean.f32(), rstd.f32(), N, C, accumulate));
    return;
  }
  cpu::layernorm_backward(din.f32(), dweight.f32(), dbias.f32(), dout.f32(), in.f32(), weight.f32(), mean.f32(),
                          rstd.f32(), N, C, accumulate);
}

void residual_layernorm_forward(const Tensor& sum_out, const Tensor& ln_out, const Tensor& mean, const Tensor& rstd,
                                const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias, float eps) {
  const char* op = "residual_layernorm_forward";
  const bool gpu = ST_ON_GPU(op, {&sum_out, &ln_out, &mean, &rstd, &a, &b, &weight, &bias});
  const OpScope timed(OpClass::norm, gpu);
  const int64_t C = weight.numel();
  ST_CHECK(C > 0, "{}: the weight is empty", op);
  const int64_t N = a.numel() / C;
  require_numel(op, a, N * C, "first operand");
  require_numel(op, b, N * C, "second operand");
  require_numel(op, sum_out, N * C, "sum");
  require_numel(op, ln_out, N * C, "output");
  require_numel(op, bias, C, "bias");
  ST_CHECK(mean.numel() >= N && rstd.numel() >= N, "{}: mean/rstd hold fewer than {} rows", op, N);
  require_no_overlap(op, sum_out, "the sum", a, "the first operand", true);
  require_no_overlap(op, sum_out, "the sum", b, "the second operand", true);
  require_no_overlap(op, ln_out, "the output", sum_out, "the sum", false);
  require_no_overlap(op, ln_out, "the output", a, "the first operand", false);
  require_no_overlap(op, ln_out, "the output", b, "the second operand", false);
  [[maybe_unused]] const bool out16 = is_bf16(op, ln_out, "the output");
  if (gpu) {
    ST_GPU_ONLY(cuda::residual_layernorm_forward(sum_out.f32(), ln_out.raw(), out16, mean.f32(), rstd.f32(), a.f32(),
                                                 b.f32(), weight.f32(), bias.f32(), N, C, eps));
    return;
  }
  RowChunks(N, {{&ln_out, C, false, true}}).run([&](int64_t r0, int64_t n, float* const* p) {
    const int64_t at = r0 * C;
    cpu::residual_layernorm_forward(sum_out.f32() + at, p[0], mean.f32() + r0, rstd.f32() + r0, a.f32() + at,
                                    b.f32() + at, weight.f32(), bias.f32(), n, C, eps);
  });
}

void layernorm_backward_add(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                            const Tensor& in, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                            const Tensor& dresidual, bool accumulate) {
  const char* op = "layernorm_backward_add";
  const bool gpu = ST_ON_GPU(op, {&din, &dweight, &dbias, &dout, &in, &weight, &mean, &rstd, &dresidual});
  const OpScope timed(OpClass::norm, gpu);
  ST_CHECK(din.defined() && dresidual.defined(), "{}: the input gradient and the residual's gradient are required", op);
  const int64_t C = weight.numel();
  ST_CHECK(C > 0, "{}: the weight is empty", op);
  const int64_t N = in.numel() / C;
  require_numel(op, in, N * C, "input");
  require_numel(op, din, N * C, "input gradient");
  require_numel(op, dout, N * C, "output gradient");
  require_numel(op, dresidual, N * C, "residual gradient");
  require_numel(op, dweight, C, "weight gradient");
  require_numel(op, dbias, C, "bias gradient");
  ST_CHECK(mean.numel() >= N && rstd.numel() >= N, "{}: mean/rstd hold fewer than {} rows", op, N);
  require_no_overlap(op, din, "the input gradient", dresidual, "the residual gradient", true);
  if (gpu) {
    ST_GPU_ONLY(cuda::layernorm_backward_add(din.f32(), dweight.f32(), dbias.f32(), dout.f32(), in.f32(), weight.f32(),
                                             mean.f32(), rstd.f32(), dresidual.f32(), N, C, accumulate));
    return;
  }
  cpu::layernorm_backward_add(din.f32(), dweight.f32(), dbias.f32(), dout.f32(), in.f32(), weight.f32(), mean.f32(),
                              rstd.f32(), dresidual.f32(), N, C, accumulate);
}

void token_position_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& wte, const Tensor& wpe) {
  const bool gpu = ST_ON_GPU("embedding_forward", {&out, &ids, &wte, &wpe});
  const OpScope timed(OpClass::embedding, gpu);
  const int64_t B = ids.dim(0), T = ids.numel() / B, V = wte.dim(0), C = wte.dim(1);
  ST_CHECK(wpe.dim(1) == C && wpe.dim(0) >= T,
           "embedding_forward: position table {} does not cover {} positions of width {}", wpe.shape().str(), T, C);
  require_numel("embedding_forward", out, B * T * C, "output");
  if (gpu) {
    ST_GPU_ONLY(cuda::embedding_forward(out.f32(), ids.i32(), wte.f32(), B * T, V, C));
    ST_GPU_ONLY(cuda::position_embedding_add(out.f32(), wpe.f32(), B, T, C));
    return;
  }
  cpu::embedding_forward(out.f32(), ids.i32(), wte.f32(), B * T, V, C);
  cpu::position_embedding_add(out.f32(), wpe.f32(), B, T, C);
}

void token_position_embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& ids,
                                       bool accumulate) {
  const bool gpu = ST_ON_GPU("embedding_backward", {&dwte, &dwpe, &dout, &ids});
  const OpScope timed(OpClass::embedding, gpu);
  const int64_t B = ids.dim(0), T = ids.numel() / B, V = dwte.dim(0), C = dwte.dim(1);
  ST_CHECK(dwpe.dim(1) == C && dwpe.dim(0) >= T,
           "embedding_backward: position table {} does not cover {} positions of width {}", dwpe.shape().str(), T, C);
  require_numel("embedding_backward", dout, B * T * C, "output gradient");
  if (gpu) {
    ST_GPU_ONLY(cuda::embedding_backward(dwte.f32(), dout.f32(), ids.i32(), B * T, V, C, accumulate));
    ST_GPU_ONLY(cuda::position_embedding_backward(dwpe.f32(), dout.f32(), B, T, C, dwpe.dim(0), accumulate));
    return;
  }
  cpu::embedding_backward(dwte.f32(), dout.f32(), ids.i32(), B * T, V, C, accumulate);
  cpu::position_embedding_backward(dwpe.f32(), dout.f32(), B, T, C, dwpe.dim(0), accumulate);
}

void token_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& wte) {
  const bool gpu = ST_ON_GPU("embedding_forward", {&out, &ids, &wte});
  const OpScope timed(OpClass::embedding, gpu);
  const int64_t N = ids.numel(), V = wte.dim(0), C = wte.dim(1);
  require_numel("embedding_forward", out, N * C, "output");
  if (gpu) {
    ST_GPU_ONLY(cuda::embedding_forward(out.f32(), ids.i32(), wte.f32(), N, V, C));
    return;
  }
  cpu::embedding_forward(out.f32(), ids.i32(), wte.f32(), N, V, C);
}

void token_embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& ids, bool accumulate) {
  const bool gpu = ST_ON_GPU("embedding_backward", {&dwte, &dout, &ids});
  const OpScope timed(OpClass::embedding, gpu);
  const int64_t N = ids.numel(), V = dwte.dim(0), C = dwte.dim(1);
  require_numel("embedding_backward", dout, N * C, "output gradient");
  if (gpu) {
    ST_GPU_ONLY(cuda::embedding_backward(dwte.f32(), dout.f32(), ids.i32(), N, V, C, accumulate));
    return;
  }
  cpu::embedding_backward(dwte.f32(), dout.f32(), ids.i32(), N, V, C, accumulate);
}

AttentionKernel attention_kernel(Device device, int64_t B, int64_t T, int64_t C, int64_t n_head, int64_t n_kv_head) {
  if (device.is_cpu()) return AttentionKernel::tiled;
#ifdef SHARDTRAIN_HAVE_CUDA
  const int64_t KV = n_kv_head > 0 ? n_kv_head : n_head;
  if (cuda::attention_backend() == cuda::AttentionBackend::materialized) {
    // The reference, where it applies: multi-head attention.
    return KV == n_head ? AttentionKernel::materialized : AttentionKernel::tiled;
  }
  if (cuda::attention_backend() == cuda::AttentionBackend::cudnn &&
      cuda::gemm_precision() == cuda::GemmPrecision::bf16) {
    const std::string why = cuda::fused_attention_unavailable(B, T, C, n_head, KV);
    if (why.empty()) return AttentionKernel::fused;
    static std::mutex mu;
    static std::set<std::array<int64_t, 5>> warned;
    const std::lock_guard<std::mutex> lock(mu);
    if (warned.insert({B, T, C, n_head, KV}).second)
      std::fprintf(stderr,
                   "shardtrain: warning: attention [%lld, %lld, %lld] in %lld heads (%lld key/value) runs tiled, "
                   "not in cuDNN: %s\n",
                   static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(C),
                   static_cast<long long>(n_head), static_cast<long long>(KV), why.c_str());
  }
#else
  (void)B, (void)T, (void)C, (void)n_head, (void)n_kv_head;
#endif
  return AttentionKernel::tiled;
}

int64_t attention_saved_floats(AttentionKernel kernel, int64_t B, int64_t T, int64_t C, int64_t n_head, DType io,
                               int64_t n_kv_head) {
  if (kernel == AttentionKernel::tiled) return B * n_head * T;
#ifdef SHARDTRAIN_HAVE_CUDA
  if (kernel == AttentionKernel::fused)
    return int64_t(
        (cuda::fused_attention_saved_bytes(B, T, C, n_head, io == DType::bf16, n_kv_head) + sizeof(float) - 1) /
        sizeof(float));
#else
  ST_CHECK(kernel == AttentionKernel::materialized, "fused attention needs the CUDA backend");
  (void)C, (void)io, (void)n_kv_head;
#endif
  return B * n_head * T * T;
}

int64_t attention_scratch_floats(AttentionKernel kernel, Device device, int64_t B, int64_t T, int64_t C,
                                 int64_t n_head) {
  switch (kernel) {
    case AttentionKernel::tiled:
#ifdef SHARDTRAIN_HAVE_CUDA
      if (!device.is_cpu()) return cuda::flash_attention_scratch_floats(T, C / n_head, B, n_head);
#else
      (void)device, (void)B;
#endif
      return cpu::flash_attention_scratch_floats(T, C / n_head);
    case AttentionKernel::materialized: return T * T;
    case AttentionKernel::fused: return 0;
  }
  return 0;
}

namespace {

struct AttentionDims {
  int64_t B, T, C, H, KV, hs;
};

// The dimensions of qkv after the shape checks the forward and backward share.
AttentionDims attention_dims(const char* fn, const Tensor& qkv, const Tensor& att, int64_t n_head, int64_t n_kv_head,
                             AttentionKernel kernel, bool gpu) {
  const int64_t H = n_head, KV = n_kv_head > 0 ? n_kv_head : n_head;
  ST_CHECK(H > 0 && KV > 0 && H % KV == 0, "{}: {} query heads do not group over {} key/value heads", fn, H, KV);
  ST_CHECK(qkv.shape().ndim() == 3 && qkv.dim(2) % (H + 2 * KV) == 0,
           "{}: qkv must be [B, T, (H + 2 KV) head_size] with H = {}, KV = {}, got {}", fn, H, KV, qkv.shape().str());
  ST_CHECK(kernel != AttentionKernel::fused || gpu, "{}: the fused kernel runs on a GPU only", fn);
  ST_CHECK(kernel != AttentionKernel::materialized || KV == H,
           "{}: grouped-query attention runs tiled or fused, not materialized", fn);
  const int64_t B = qkv.dim(0), T = qkv.dim(1), hs = qkv.dim(2) / (H + 2 * KV), C = H * hs;
  ST_CHECK(att.numel() >= attention_saved_floats(kernel, B, T, C, n_head, qkv.dtype(), KV),
           "{}: saved-state buffer too small", fn);
  return {B, T, C, H, KV, hs};
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int64_t n_head, AttentionKernel kernel,
                       int64_t n_kv_head) {
  const char* fn = "attention_forward";
  const bool gpu = ST_ON_GPU(fn, {&out, &att, &qkv});
  const OpScope timed(OpClass::attention, gpu);
  const AttentionDims d = attention_dims(fn, qkv, att, n_head, n_kv_head, kernel, gpu);
  require_numel(fn, out, d.B * d.T * d.C, "output");
  const bool qkv16 = is_bf16(fn, qkv, "qkv"), out16 = is_bf16(fn, out, "the output");
  if (gpu && kernel == AttentionKernel::fused) {
    ST_CHECK(qkv16 == out16, "{}: the fused kernel takes qkv and its output in one type", fn);
    ST_GPU_ONLY(cuda::fused_attention_forward(out.raw(), att.raw(), qkv.raw(), d.B, d.T, d.C, n_head, qkv16, d.KV));
    return;
  }
  if (gpu && kernel == AttentionKernel::tiled) {
    ST_GPU_ONLY(
        cuda::flash_attention_forward(out.raw(), out16, att.f32(), qkv.raw(), qkv16, d.B, d.T, d.H, d.KV, d.hs));
    return;
  }
  if (!gpu && kernel == AttentionKernel::tiled && cpu::one_tile_attention_fits(d.T)) {
    // bf16 tensors read and written where they are (no f32 copies).
    cpu::one_tile_attention_forward(out.raw(), out16, att.f32(), qkv.raw(), qkv16, d.B, d.T, d.H, d.KV, d.hs);
    return;
  }
  const F32Stand x(fn, qkv, true, 0), y(fn, out, false, 1);
  if (gpu) {
    ST_GPU_ONLY(cuda::attention_forward(y.get(), att.f32(), x.get(), d.B, d.T, d.C, n_head));
  } else if (kernel == AttentionKernel::tiled) {
    cpu::flash_attention_forward(y.get(), att.f32(), x.get(), d.B, d.T, d.H, d.KV, d.hs);
  } else {
    cpu::attention_forward(y.get(), att.f32(), x.get(), d.B, d.T, d.C, n_head);
  }
  y.store();
}

void attention_backward(const Tensor& dqkv, const Tensor& scratch, const Tensor& dout, const Tensor& qkv,
                        const Tensor& out, const Tensor& att, int64_t n_head, AttentionKernel kernel,
                        int64_t n_kv_head) {
  const char* fn = "attention_backward";
  const bool gpu = ST_ON_GPU(fn, {&dqkv, &scratch, &dout, &qkv, &out, &att});
  const OpScope timed(OpClass::attention, gpu);
  const AttentionDims d = attention_dims(fn, qkv, att, n_head, n_kv_head, kernel, gpu);
  require_numel(fn, dqkv, qkv.numel(), "qkv gradient");
  require_numel(fn, dout, d.B * d.T * d.C, "output gradient");
  require_numel(fn, out, d.B * d.T * d.C, "the forward's output");
  ST_CHECK(scratch.numel() >= attention_scratch_floats(kernel, qkv.device(), d.B, d.T, d.C, n_head),
           "attention_backward: scratch holds fewer than attention_scratch_floats");
  [[maybe_unused]] const bool dqkv16 = is_bf16(fn, dqkv, "the qkv gradient");
  [[maybe_unused]] const bool qkv16 = is_bf16(fn, qkv, "qkv");
  if (gpu && kernel == AttentionKernel::fused) {
    ST_CHECK(is_bf16(fn, out, "the forward's output") == qkv16,
             "{}: the fused kernel takes qkv and its output in one type", fn);
    ST_GPU_ONLY(cuda::fused_attention_backward(dqkv.raw(), dout.f32(), att.raw(), qkv.raw(), out.raw(), d.B, d.T, d.C,
                                               n_head, qkv16, dqkv16, d.KV));
    return;
  }
  if (gpu && kernel == AttentionKernel::tiled) {
    ST_GPU_ONLY(cuda::flash_attention_backward(dqkv.raw(), dqkv16, scratch.f32(), dout.f32(), qkv.raw(), qkv16,
                                               out.raw(), is_bf16(fn, out, "the forward's output"), att.f32(), d.B, d.T,
                                               d.H, d.KV, d.hs));
    return;
  }
  if (!gpu && kernel == AttentionKernel::tiled && cpu::one_tile_attention_fits(d.T)) {
    cpu::one_tile_attention_backward(dqkv.raw(), dqkv16, dout.f32(), qkv.raw(), qkv16, out.raw(),
                                     is_bf16(fn, out, "the forward's output"), att.f32(), d.B, d.T, d.H, d.KV, d.hs);
    return;
  }
  const F32Stand x(fn, qkv, true, 0), dx(fn, dqkv, false, 1);
  if (gpu) {
    ST_GPU_ONLY(cuda::attention_backward(dx.get(), dout.f32(), x.get(), att.f32(), d.B, d.T, d.C, n_head));
  } else if (kernel == AttentionKernel::tiled) {
    const F32Stand o(fn, out, true, 2);
    cpu::flash_attention_backward(dx.get(), scratch.f32(), dout.f32(), x.get(), o.get(), att.f32(), d.B, d.T, d.H, d.KV,
                                  d.hs);
  } else {
    cpu::attention_backward(dx.get(), scratch.f32(), dout.f32(), x.get(), att.f32(), d.B, d.T, d.C, n_head);
  }
  dx.store();
}

void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight, float eps) {
  const char* op = "rmsnorm_forward";
  const bool gpu = ST_ON_GPU(op, {&out, &rstd, &in, &weight});
  const OpScope timed(OpClass::norm, gpu);
  const int64_t C = weight.numel();
  ST_CHECK(C > 0, "{}: the weight is empty", op);
  const int64_t N = in.numel() / C;
  require_numel(op, in, N * C, "input");
  require_numel(op, out, N * C, "output");
  ST_CHECK(rstd.numel() >= N, "{}: rstd holds fewer than {} rows", op, N);
  [[maybe_unused]] const bool out16 = is_bf16(op, out, "the output");
  if (gpu) {
    ST_GPU_ONLY(cuda::rmsnorm_forward(out.raw(), out16, rstd.f32(), in.f32(), weight.f32(), N, C, eps));
    return;
  }
  RowChunks(N, {{&out, C, false, true}}).run([&](int64_t r0, int64_t n, float* const* p) {
    cpu::rmsnorm_forward(p[0], rstd.f32() + r0, in.f32() + r0 * C, weight.f32(), n, C, eps);
  });
}

void residual_rmsnorm_forward(const Tensor& sum_out, const Tensor& out, const Tensor& rstd, const Tensor& a,
                              const Tensor& b, const Tensor& weight, float eps) {
  const char* op = "residual_rmsnorm_forward";
  const bool gpu = ST_ON_GPU(op, {&sum_out, &out, &rstd, &a, &b, &weight});
  const OpScope timed(OpClass::norm, gpu);
  const int64_t C = weight.numel();
  ST_CHECK(C > 0, "{}: the weight is empty", op);
  const int64_t N = a.numel() / C;
  require_numel(op, a, N * C, "first operand");
  require_numel(op, b, N * C, "second operand");
  require_numel(op, sum_out, N * C, "sum");
  require_numel(op, out, N * C, "output");
  ST_CHECK(rstd.numel() >= N, "{}: rstd holds fewer than {} rows", op, N);
  require_no_overlap(op, sum_out, "the sum", a, "the first operand", true);
  require_no_overlap(op, sum_out, "the sum", b, "the second operand", true);
  require_no_overlap(op, out, "the output", sum_out, "the sum", false);
  require_no_overlap(op, out, "the output", a, "the first operand", false);
  require_no_overlap(op, out, "the output", b, "the second operand", false);
  [[maybe_unused]] const bool out16 = is_bf16(op, out, "the output");
  if (gpu) {
    ST_GPU_ONLY(cuda::residual_rmsnorm_forward(sum_out.f32(), out.raw(), out16, rstd.f32(), a.f32(), b.f32(),
                                               weight.f32(), N, C, eps));
    return;
  }
  RowChunks(N, {{&out, C, false, true}}).run([&](int64_t r0, int64_t n, float* const* p) {
    const int64_t at = r0 * C;
    cpu::residual_rmsnorm_forward(sum_out.f32() + at, p[0], rstd.f32() + r0, a.f32() + at, b.f32() + at, weight.f32(),
                                  n, C, eps);
  });
}

void rmsnorm_backward(const Tensor& din, const Tensor& dweight, const Tensor& dout, const Tensor& in,
                      const Tensor& weight, const Tensor& rstd, const Tensor& dresidual, bool accumulate) {
  const char* op = "rmsnorm_backward";
  const bool gpu = ST_ON_GPU(op, {&din, &dweight, &dout, &in, &weight, &rstd, &dresidual});
  const OpScope timed(OpClass::norm, gpu);
  ST_CHECK(din.defined(), "{}: the input gradient is required", op);
  const int64_t C = weight.numel();
  ST_CHECK(C > 0, "{}: the weight is empty", op);
  const int64_t N = in.numel() / C;
  require_numel(op, in, N * C, "input");
  require_numel(op, din, N * C, "input gradient");
  require_numel(op, dout, N * C, "output gradient");
  require_numel(op, dweight, C, "weight gradient");
  ST_CHECK(rstd.numel() >= N, "{}: rstd holds fewer than {} rows", op, N);
  if (dresidual.defined()) {
    require_numel(op, dresidual, N * C, "residual gradient");
    require_no_overlap(op, din, "the input gradient", dresidual, "the residual gradient", true);
  }
  if (gpu) {
    ST_GPU_ONLY(cuda::rmsnorm_backward(din.f32(), dweight.f32(), dout.f32(), in.f32(), weight.f32(), rstd.f32(),
                                       opt(dresidual), N, C, accumulate));
    return;
  }
  cpu::rmsnorm_backward(din.f32(), dweight.f32(), dout.f32(), in.f32(), weight.f32(), rstd.f32(), opt(dresidual), N, C,
                        accumulate);
}

namespace {

void rope(const char* op, const Tensor& x, int64_t n_heads, int64_t hs, float theta, bool forward) {
  const bool gpu = ST_ON_GPU(op, {&x});
  const OpScope timed(OpClass::elementwise, gpu);
  ST_CHECK(x.shape().ndim() == 3, "{}: x must be [B, T, row], got {}", op, x.shape().str());
  const int64_t B = x.dim(0), T = x.dim(1), row = x.dim(2);
  ST_CHECK(hs > 0 && hs % 2 == 0 && n_heads >= 0 && n_heads * hs <= row,
           "{}: {} heads of size {} (even) do not fit rows of {}", op, n_heads, hs, row);
  ST_CHECK(theta > 0.0f, "{}: theta must be positive, got {}", op, theta);
  [[maybe_unused]] const bool x16 = is_bf16(op, x, "x");
  if (gpu) {
    ST_GPU_ONLY(forward ? cuda::rope_forward(x.raw(), x16, B, T, row, n_heads, hs, theta)
                        : cuda::rope_backward(x.raw(), x16, B, T, row, n_heads, hs, theta));
    return;
  }
  // Whole sequences a chunk: a row's rotation depends on its position.
  RowChunks(B, {{&x, T * row, true, true}}).run([&](int64_t, int64_t n, float* const* p) {
    if (forward)
      cpu::rope_forward(p[0], n, T, row, n_heads, hs, theta);
    else
      cpu::rope_backward(p[0], n, T, row, n_heads, hs, theta);
  });
}

}  // namespace

void rope_forward(const Tensor& x, int64_t n_heads, int64_t hs, float theta) {
  rope("rope_forward", x, n_heads, hs, theta, true);
}

void rope_backward(const Tensor& dx, int64_t n_heads, int64_t hs, float theta) {
  rope("rope_backward", dx, n_heads, hs, theta, false);
}

void swiglu_forward(const Tensor& h, const Tensor& gu) {
  const char* op = "swiglu_forward";
  const bool gpu = ST_ON_GPU(op, {&h, &gu});
  const OpScope timed(OpClass::elementwise, gpu);
  const int64_t F = gu.shape()[-1] / 2, N = F > 0 ? gu.numel() / (2 * F) : 0;
  ST_CHECK(F > 0 && gu.shape()[-1] == 2 * F, "{}: gu's last dimension must be 2F, got {}", op, gu.shape().str());
  require_numel(op, h, N * F, "output");
  [[maybe_unused]] const bool h16 = is_bf16(op, h, "the output"), gu16 = is_bf16(op, gu, "gu");
  if (gpu) {
    ST_GPU_ONLY(cuda::swiglu_forward(h.raw(), h16, gu.raw(), gu16, N, F));
    return;
  }
  RowChunks(N, {{&gu, 2 * F, true, false}, {&h, F, false, true}}).run([&](int64_t, int64_t n, float* const* p) {
    cpu::swiglu_forward(p[1], p[0], n, F);
  });
}

void swiglu_backward(const Tensor& dgu, const Tensor& dh, const Tensor& gu) {
  const char* op = "swiglu_backward";
  const bool gpu = ST_ON_GPU(op, {&dgu, &dh, &gu});
  const OpScope timed(OpClass::elementwise, gpu);
  const int64_t F = gu.shape()[-1] / 2, N = F > 0 ? gu.numel() / (2 * F) : 0;
  ST_CHECK(F > 0 && gu.shape()[-1] == 2 * F, "{}: gu's last dimension must be 2F, got {}", op, gu.shape().str());
  require_numel(op, dgu, N * 2 * F, "gu's gradient");
  require_numel(op, dh, N * F, "the output gradient");
  [[maybe_unused]] const bool dgu16 = is_bf16(op, dgu, "gu's gradient"), dh16 = is_bf16(op, dh, "dh"),
                              gu16 = is_bf16(op, gu, "gu");
  if (gpu) {
    ST_GPU_ONLY(cuda::swiglu_backward(dgu.raw(), dgu16, dh.raw(), dh16, gu.raw(), gu16, N, F));
    return;
  }
  RowChunks(N, {{&dh, F, true, false}, {&gu, 2 * F, true, false}, {&dgu, 2 * F, false, true}})
      .run([&](int64_t, int64_t n, float* const* p) { cpu::swiglu_backward(p[2], p[0], p[1], n, F); });
}

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  const bool gpu = ST_ON_GPU("add", {&out, &a, &b});
  const OpScope timed(OpClass::elementwise, gpu);
  require_numel("add", b, a.numel(), "second operand");
  require_numel("add", out, a.numel(), "output");
  if (gpu) {
    ST_GPU_ONLY(cuda::add(out.f32(), a.f32(), b.f32(), a.numel()));
    return;
  }
  cpu::add(out.f32(), a.f32(), b.f32(), a.numel());
}

double sum_squares(const Tensor& x) {
  const bool gpu = ST_ON_GPU("sum_squares", {&x});
  const OpScope timed(OpClass::grad_norm, gpu);
  if (gpu) {
    ST_GPU_ONLY(return cuda::sum_squares(x.f32(), x.numel()));
  }
  return cpu::sum_squares(x.f32(), x.numel());
}

void sum_squares(const Tensor& sq, const Tensor& x) {
  const bool gpu = ST_ON_GPU("sum_squares", {&sq, &x});
  const OpScope timed(OpClass::grad_norm, gpu);
  require_numel("sum_squares", sq, 1, "result");
  if (gpu) {
    ST_GPU_ONLY(cuda::sum_squares_into(sq.f32(), x.f32(), x.numel()));
    return;
  }
  sq.f32()[0] = float(cpu::sum_squares(x.f32(), x.numel()));
}

void clip_to_max_norm(const Tensor& grads, double max_norm) {
  const bool gpu = ST_ON_GPU("clip_to_max_norm", {&grads});
  const OpScope timed(OpClass::grad_norm, gpu);
  if (gpu) {
    ST_GPU_ONLY(cuda::clip_to_max_norm(grads.f32(), grads.numel(), max_norm));
    return;
  }
  if (max_norm > 0)
    cpu::clip_to_norm(grads.f32(), grads.numel(), std::sqrt(cpu::sum_squares(grads.f32(), grads.numel())), max_norm);
}

void clip_to_squared_norm(const Tensor& grads, const Tensor& sq, double max_norm) {
  const bool gpu = ST_ON_GPU("clip_to_squared_norm", {&grads, &sq});
  const OpScope timed(OpClass::grad_norm, gpu);
  require_numel("clip_to_squared_norm", sq, 1, "squared norm");
  if (gpu) {
    ST_GPU_ONLY(cuda::clip_to_squared_norm(grads.f32(), grads.numel(), sq.f32(), max_norm));
    return;
  }
  cpu::clip_to_norm(grads.f32(), grads.numel(), std::sqrt(double(sq.f32()[0])), max_norm);
}

void scale_inplace(const Tensor& x, float s) {
  const bool gpu = ST_ON_GPU("scale", {&x});
  const OpScope timed(OpClass::elementwise, gpu);
  if (gpu) {
    ST_GPU_ONLY(cuda::scale_inplace(x.f32(), x.numel(), s));
    return;
  }
  cpu::scale_inplace(x.f32(), x.numel(), s);
}

void convert(const Tensor& out, const Tensor& in) {
  const bool gpu = ST_ON_GPU("convert", {&out, &in});
  const OpScope timed(OpClass::convert, gpu);
  require_numel("convert", out, in.numel(), "output");
  if (in.dtype() == DType::f32 && out.dtype() == DType::bf16) {
    if (gpu) {
      ST_GPU_ONLY(cuda::f32_to_bf16(out.bf16_data(), in.f32(), in.numel()));
      return;
    }
    cpu::f32_to_bf16(out.bf16_data(), in.f32(), in.numel());
  } else if (in.dtype() == DType::bf16 && out.dtype() == DType::f32) {
    if (gpu) {
      ST_GPU_ONLY(cuda::bf16_to_f32(out.f32(), in.bf16_data(), in.numel()));
      return;
    }
    cpu::bf16_to_f32(out.f32(), in.bf16_data(), in.numel());
  } else {
    throw Error(fmt::format("convert: {} to {} is not supported", dtype_name(in.dtype()), dtype_name(out.dtype())));
  }
}

}  // namespace shardtrain::ops
