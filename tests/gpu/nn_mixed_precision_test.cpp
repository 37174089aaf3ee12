// Mixed precision on the GPU (runtime.precision = "bf16"): a small GPT whose
// transformer blocks keep bf16 activations, on the GPU against the same
// model on the CPU (bf16 GEMMs and activations on both), for each linear
// backend (cuBLASLt's bf16 outputs and epilogues, plain cuBLAS's staged
// fallbacks) and each attention kernel (cuDNN's with bf16 in and out, the
// materialized one on staged copies): logits and every parameter gradient
// within bf16's tolerance, and the same step twice gives the same bits.
// The logits are bf16 too, with the loss's gradient written over them.
// Skips without a CUDA device. Lines for scripts/gpu-check.sh:
//   GPUCHECK kernel=mixed_<what>_<linear>_<attention> dtype=bf16 relerr=<e> limit=<l> ok=<0|1>
#include "kernels/devices.h"
#include "kernels/gemm_precision.h"
#include "kernels/ops.h"
#include "runtime/core/allocator.h"
#include "runtime/nn/models.h"
#include "tests/gpu/gpu_test_util.h"

#include <cstring>
#include <string>
#include <vector>

namespace shardtrain {
namespace {

using gpu_test::gpu;
using gpu_test::rel_error;
using gpu_test::report;
using gpu_test::to_host;

constexpr int64_t B = 4, T = 64, V = 128;

nn::ModelSpec small_gpt() {
  nn::ModelSpec spec;
  spec.kind = nn::ModelKind::gpt;
  spec.n_layer = 2;
  spec.n_head = 2;  // head size 32: cuDNN's fused attention takes it
  spec.n_embd = 64;
  return spec;
}

Tensor tokens() {
  Tensor x = Tensor::empty({B, T}, DType::i32);
  for (int64_t i = 0; i < x.numel(); ++i) x.i32()[i] = int32_t((i * 37 + 11) % V);
  return x;
}

// One forward and backward: the logits, then the flat gradients (host f32).
struct StepResult {
  Tensor logits, grads;
};

// A host f32 copy (bf16 values widened, exactly).
Tensor host_f32(const Tensor& t) {
  const Tensor h = to_host(t);
  if (h.dtype() == DType::f32) return h;
  Tensor f = Tensor::empty(h.shape());
  ops::convert(f, h);
  return f;
}

// The logits are bf16 (the head's LayerNorm and classifier keep bf16
// outputs), and the loss writes their gradient over them.
StepResult step(nn::Model& model, const Tensor& x) {
  const Tensor logits = model.forward(x);
  EXPECT_EQ(logits.dtype(), DType::bf16);
  const Tensor logits_before = host_f32(logits);
  std::vector<int32_t> labels(size_t(B * T));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t((i * 13 + 5) % V);
  ops::softmax_xent_fused(logits, logits, labels.data(), 1.0f / float(B * T));
  model.backward(logits);
  return {logits_before, host_f32(model.flat().grads())};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(MixedPrecision, Bf16GptOnTheGpuMatchesTheCpu) {
  ST_REQUIRE_GPU();
  Bf16Gemms bf16;  // bf16 GEMMs on both devices, as runtime.precision = "bf16" sets them
  bf16.enter();
  const Tensor x = tokens();
  auto cpu_model = nn::build_model(small_gpt(), Shape{T}, V);
  cpu_model->initialize(3);
  cpu_model->set_activation_dtype(DType::bf16);
  const StepResult want = step(*cpu_model, x);
  const Tensor x_gpu = to_device(x, gpu());
  for (const char* linear : {"cublaslt", "cublas"}) {
    for (const char* attention : {"cudnn", "tiled", "materialized"}) {
      set_gpu_linear_backend(linear);
      set_gpu_attention_backend(attention);
      auto model = nn::build_model(small_gpt(), Shape{T}, V);
      model->initialize(3);
      model->to(gpu());
      model->set_activation_dtype(DType::bf16);
      const StepResult got = step(*model, x_gpu);
      const std::string sfx = std::string("_") + linear + "_" + attention;
      report("mixed_logits" + sfx, "bf16", rel_error(got.logits, want.logits), gpu_test::kLimitBf16);
      report("mixed_grads" + sfx, "bf16", rel_error(got.grads, want.grads), 2 * gpu_test::kLimitBf16);
      const StepResult again = step(*model, x_gpu);
      const bool repeat = same_bits(again.logits, got.logits) && same_bits(again.grads, got.grads);
      report("mixed_repeat" + sfx, "bf16", repeat ? 0.0 : 1.0, 0.5);
    }
  }
  set_gpu_linear_backend("cublaslt");
  set_gpu_attention_backend("cudnn");
  bf16.leave();
}

nn::ModelSpec small_llama() {
  nn::ModelSpec spec;
  spec.kind = nn::ModelKind::llama;
  spec.n_layer = 3;
  spec.n_head = 2;  // head size 32: cuDNN's fused attention takes it
  spec.n_embd = 64;
  spec.ffn_hidden = 96;
  return spec;
}

// A Llama with bf16 activations on the GPU against the CPU, in every
// activation checkpointing mode: within bf16's tolerance of the CPU, and
// each mode the bits of `none` on the GPU too (the recompute runs the same
// kernels, the Linears' transient weight copies round as the kept ones did).
TEST(MixedPrecision, Bf16LlamaOnTheGpuMatchesTheCpuInEveryCheckpointingMode) {
  ST_REQUIRE_GPU();
  Bf16Gemms bf16;
  bf16.enter();
  const Tensor x = tokens();
  auto cpu_model = nn::build_model(small_llama(), Shape{T}, V);
  cpu_model->initialize(3);
  cpu_model->set_activation_dtype(DType::bf16);
  const StepResult want = step(*cpu_model, x);
  const Tensor x_gpu = to_device(x, gpu());
  StepResult none;
  for (const nn::Recompute mode : {nn::Recompute::none, nn::Recompute::selective, nn::Recompute::full}) {
    auto model = nn::build_model(small_llama(), Shape{T}, V);
    model->initialize(3);
    model->to(gpu());
    model->set_activation_dtype(DType::bf16);
    model->set_activation_checkpointing(mode);
    const StepResult got = step(*model, x_gpu);
    const std::string sfx = fmt::format("_llama_{}", mode);
    report("mixed_logits" + sfx, "bf16", rel_error(got.logits, want.logits), gpu_test::kLimitBf16);
    report("mixed_grads" + sfx, "bf16", rel_error(got.grads, want.grads), 2 * gpu_test::kLimitBf16);
    if (mode == nn::Recompute::none) {
      none = got;
    } else {
      const bool same = same_bits(got.logits, none.logits) && same_bits(got.grads, none.grads);
      report("checkpointing_bits" + sfx, "bf16", same ? 0.0 : 1.0, 0.5);
    }
  }
  bf16.leave();
}

// What `shardtrain plan` counts for a GPU with bf16 GEMMs, against what the
// allocator counts when the model runs: the activations (f32 or bf16) and
// the linear layers' kept bf16 copies. With the tiled attention, whose
// log-sum-exp rows are what the plan counts.
TEST(MixedPrecision, ActivationsAndKeptCopiesAreWhatThePlanCounts) {
  ST_REQUIRE_GPU();
  Bf16Gemms bf16;
  bf16.enter();
  set_gpu_attention_backend("tiled");
  const Tensor x_gpu = to_device(tokens(), gpu());
  for (const DType act : {DType::f32, DType::bf16}) {
    // A first model grows the kernels' workspaces, so that the second's
    // figures hold its own buffers only.
    for (int pass = 0; pass < 2; ++pass) {
      auto model = nn::build_model(small_gpt(), Shape{T}, V);
      model->initialize(3);
      model->to(gpu());
      model->set_plan_device(gpu());
      model->set_activation_dtype(act);
      const Tensor dlogits = Tensor::zeros(batched(B, model->output_sample()), DType::f32, gpu());
      const int64_t before = memory_stats(gpu()).current_bytes;
      model->forward(x_gpu);
      model->backward(dlogits);
      const int64_t got = memory_stats(gpu()).current_bytes - before;
      const int64_t want = model->activation_bytes(B, true) + model->kept_bf16_bytes(B);
      if (pass == 0) continue;
      EXPECT_EQ(got, want) << dtype_name(act) << " activations";
      report(std::string("plan_memory_") + std::string(dtype_name(act)) + "_activations", "bf16",
             gpu_test::rel_error_scalar(double(got), double(want)), 1e-9);
    }
  }
  set_gpu_attention_backend("cudnn");
  bf16.leave();
}

}  // namespace
}  // namespace shardtrain
