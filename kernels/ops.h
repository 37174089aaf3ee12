// The kernel interface the layers call: Tensor in, Tensor out. Each op checks
// shapes, dtypes and that all tensors share one device, then runs the CPU
// kernel (kernels/cpu) or, for CUDA tensors, the CUDA kernel (kernels/cuda,
// added by the GPU backend). Layers never see which one ran. Each op times
// itself in its class when telemetry.op_timing is on (runtime/core/op_timing.h).
//
// Conventions (as in kernels/cpu): an input-gradient tensor that is not
// defined() is skipped; parameter gradients are overwritten, or added to when
// `accumulate` (gradient accumulation).
//
// Mixed precision (runtime.precision = "bf16"): a transformer block's
// activations may be bf16 where an op below says so; parameters, their
// gradients, normalization statistics, the residual stream and every
// reduction stay f32. A bf16 output is the f32 result rounded once (to
// nearest even); a bf16 input is read exactly. On a GPU the kernels take
// bf16 directly (cuBLASLt's output types, cuDNN's attention, the LayerNorm
// kernels); elsewhere the op widens to f32, runs the f32 kernel and rounds,
// except that the CPU's linear layers, where the products take bf16
// operands (cpu::bf16_operand_products), hand them their bf16 inputs as
// they are and round f32 ones once, widening only what they write.
#pragma once

#include "kernels/kernel_params.h"
#include "runtime/core/tensor.h"

#include <cstdint>
#include <span>

namespace shardtrain::ops {

// x: [..., IC] viewed as [rows, IC]; weight [OC, IC]; bias [OC]; out [..., OC].
// x, out, pre and their gradients may be bf16 (pre of out's type forward,
// of dpre's backward); on a GPU bf16 ones need `keep` / `kept`.
// `keep`, where linear_keeps_bf16(device): a bf16 tensor of at least
// linear_kept_elements(rows, IC, OC) values into which the forward puts its
// bf16 copies of x and weight; the backward, given the same tensor, reads
// them instead of converting x and weight again, and converts dout once for
// both its GEMMs (kernels/cuda/linear.h; the CPU keeps the same layout).
// The same results, fewer passes.
// keep_has_weight: `keep` already holds this weight's copy, made by an
// earlier forward of the same layer, and the weight has not changed since
// (the micro-batches after a step's first): only x is converted.
void linear_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias,
                    const Tensor& keep = Tensor(), bool keep_has_weight = false);
void linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& in, const Tensor& weight, bool accumulate, const Tensor& kept = Tensor());
// A linear layer and the GELU after it: pre = in W^T + bias, out = gelu(pre).
// And the backward of a linear layer whose input was gelu(pre): dpre is the
// gradient with respect to pre. On a GPU with bf16 GEMMs and cuBLASLt one
// GEMM each (its GELU epilogues); elsewhere, and as the fallback, the GEMM
// and the GELU kernel: on the CPU the bits of linear + gelu.
void linear_gelu_forward(const Tensor& out, const Tensor& pre, const Tensor& in, const Tensor& weight,
                         const Tensor& bias, const Tensor& keep = Tensor(), bool keep_has_weight = false);
void linear_backward_through_gelu(const Tensor& dpre, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                  const Tensor& in, const Tensor& weight, const Tensor& pre, bool accumulate,
                                  const Tensor& kept = Tensor());
// True on a GPU whose GEMMs are bf16, and on the CPU where its products take
// bf16 operands and set_cpu_linear_keeps_bf16 allows it (each product would
// convert its operands).
bool linear_keeps_bf16(Device device);
// Whether the CPU's linear layers keep their bf16 copies for the backward:
// under mixed precision (runtime.precision = "bf16"), not where only FSDP's
// bf16 parameters switch the products to bf16 around a Block, whose weights
// are gathered for that Block alone (a kept copy of each would undo the
// sharding). Off until set.
void set_cpu_linear_keeps_bf16(bool keep);
// True where the CPU's products take bf16 operands (cpu::bf16_operand_products):
// the linear ops then read their bf16 inputs and output gradients as they
// are, write a bf16 output through an L2-sized f32 buffer of their own, and
// widen only a bf16 input gradient (and, through a GELU, its input): what a
// memory plan counts.
bool cpu_linear_reads_bf16();
// True where the CPU's attention over sequences of T reads and writes bf16
// tensors as they are, with no f32 copies (the one-tile kernel, T <= 64).
bool cpu_attention_reads_bf16(int64_t T);
// A bf16 input is itself the kept copy: only the weight's is made.
int64_t linear_kept_elements(int64_t rows, int64_t IC, int64_t OC, DType in = DType::f32);

void relu_forward(const Tensor& out, const Tensor& in);
void relu_backward(const Tensor& din, const Tensor& dout, const Tensor& out);
void gelu_forward(const Tensor& out, const Tensor& in);
void gelu_backward(const Tensor& din, const Tensor& dout, const Tensor& in);

// in [B, C, H, W]; weight [OC, C*K*K]; out [B, OC, OH, OW]; col: workspace of
// at least s.col_floats() floats.
void conv2d_forward(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& col,
                    const kernels::Conv2dShape& s);
void conv2d_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& in, const Tensor& weight, const Tensor& col, const kernels::Conv2dShape& s,
                     bool accumulate);

// argmax: i32, out's numel.
void maxpool2d_forward(const Tensor& out, const Tensor& argmax, const Tensor& in, const kernels::Pool2dShape& s);
void maxpool2d_backward(const Tensor& din, const Tensor& dout, const Tensor& argmax, const kernels::Pool2dShape& s);

// A convolution and the 2x2/2 max-pool after it (ps: the pool of the
// convolution's output). Where conv2d_maxpool_fuses (the CPU, where oneDNN
// runs the convolution: cpu::onednn_conv_pools), the pool reads oneDNN's
// layout and the convolution's own NCHW output is never made: conv_out may
// be undefined. Elsewhere conv2d_forward into conv_out (a temporary where
// it is undefined), then maxpool2d_forward. The same bits either way; timed
// as a convolution. With `relu` (only where conv2d_maxpool_fuses) the pooled
// output is also the ReLU's after the pool, and argmax -1 where the ReLU
// zeroed it: maxpool2d_backward then gives the gradient that the ReLU's
// backward and the pool's would.
bool conv2d_maxpool_fuses(Device device, const kernels::Conv2dShape& cs, const kernels::Pool2dShape& ps);
void conv2d_maxpool_forward(const Tensor& pooled, const Tensor& argmax, const Tensor& conv_out, const Tensor& in,
                            const Tensor& weight, const Tensor& bias, const Tensor& col, const kernels::Conv2dShape& cs,
                            const kernels::Pool2dShape& ps, bool relu = false);

// logits [N, C], f32 or bf16 (mixed precision's head; dlogits then bf16
// too, each value its f32 one rounded once); labels on the host, N of them.
// Returns the summed loss;
// dlogits = scale * (softmax - onehot).
double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const int32_t* labels, float scale);
// The same loss with everything on the logits' device and nothing returned:
// labels i32 [N] there, each row's loss written to row_loss (f32 [N]), so a
// training step never waits for the device to learn its loss (it reads all
// rows once, at its end). The labels must be valid: check them on the host
// with check_labels before they go to a GPU (a GPU kernel cannot raise; it
// writes NaN as the loss of a row with a bad label and leaves its gradient).
void softmax_xent_fused_rows(const Tensor& dlogits, const Tensor& logits, const Tensor& labels, float scale,
                             const Tensor& row_loss);
// An Error naming the first of n host labels outside [0, classes).
void check_labels(const int32_t* labels, int64_t n, int64_t classes);
// The same for n host token ids against an embedding of `vocab` rows, with
// the embedding kernels' message: what goes to a GPU is checked here first
// (its kernels find a bad id too, but report it only at the next wait).
void check_token_ids(const int32_t* ids, int64_t n, int64_t vocab);
double softmax_xent_forward(const Tensor& logits, const int32_t* labels);
int64_t count_correct(const Tensor& logits, const int32_t* labels);

// Optimizer updates over equal-length flat ranges. `step` holds the step's
// scalars on the parameters' device (the floats() of a kernels::SgdStep or
// AdamWStep, written by store_floats): hp.lr and AdamW's hp.weight_decay
// are read from there, not from hp.
void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const kernels::SgdParams& hp,
                const Tensor& step);
void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const kernels::AdamWParams& hp, const Tensor& step);
// Host values into the front of f32 tensor x, in stream order on a GPU (as
// a kernel's arguments, at most 8): the caller's copy is free on return.
void store_floats(const Tensor& x, std::span<const float> values);

// LayerNorm over the last dimension: in/out [..., C] viewed as [rows, C];
// weight, bias [C]; mean, rstd [rows] saved for backward. The forward's
// output (ln_out below) may be bf16. din (required) is
// overwritten; dweight/dbias overwritten or added to when accumulate.
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, float eps);
void layernorm_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& in, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                        bool accumulate);
// A residual connection feeding a LayerNorm, in one pass over the rows (a
// transformer block's x + attention, then ln2): sum_out = a + b, then
// layernorm_forward of sum_out into ln_out, mean/rstd saved as there. The
// bits of add(sum_out, a, b) followed by layernorm_forward, on either device.
// sum_out may be a or b itself; any other overlap among sum_out, ln_out, a
// and b is an error.
void residual_layernorm_forward(const Tensor& sum_out, const Tensor& ln_out, const Tensor& mean, const Tensor& rstd,
                                const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias, float eps);
// layernorm_backward with a residual's gradient added to the input gradient
// as it is written: din = the LayerNorm's input gradient + dresidual (din may
// be dresidual itself; another overlap is an error); dweight/dbias as in
// layernorm_backward. The bits of layernorm_backward followed by
// add(din, din, dresidual), on either device.
void layernorm_backward_add(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                            const Tensor& in, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                            const Tensor& dresidual, bool accumulate);

// Token + learned position embedding: ids i32 [B, T]; wte [V, C]; wpe [P, C]
// with P >= T; out [B, T, C] = wte[ids] + wpe[t].
void token_position_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& wte, const Tensor& wpe);
void token_position_embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& ids,
                                       bool accumulate);

// Token embedding alone (a Llama's; its positions come from RoPE): ids i32
// [B, T]; wte [V, C]; out [B, T, C] = wte[ids].
void token_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& wte);
void token_embedding_backward(const Tensor& dwte, const Tensor& dout, const Tensor& ids, bool accumulate);

// Causal multi-head self-attention: qkv [B, T, (H + 2 KV) hs] holds the H
// query heads, then the KV key heads, then the KV value heads (n_kv_head =
// KV; 0 means KV = H, the GPT's [B, T, 3C]; query head h reads kv head
// h / (H / KV): grouped-query attention); out [B, T, H hs]; `att` keeps
// what the backward needs; scratch at least attention_scratch_floats.
// dqkv is overwritten. Three kernels compute it:
//   tiled         flash attention's scheme (kernels/cpu/flash_attention.h,
//                 kernels/cuda/flash_attention.h):
//                 an online softmax over tiles, `att` keeps each row's
//                 log-sum-exp (B x H x T), the backward recomputes the
//                 tiles: nothing grows as T^2
//   materialized  the B x n_head x T x T probabilities in `att` (f32): the
//                 reference (multi-head only)
//   fused         cuDNN's flash attention (kernels/cuda/fused_attention.h):
//                 the softmax's log-sum-exp rows, and bf16 copies of Q, K,
//                 V and O where qkv and out are f32 (bf16 ones are read in
//                 place: the backward is given the forward's qkv and out)
// attention_kernel() says which runs on `device`: tiled on the CPU; on a
// GPU with runtime.gpu_attention = cudnn, fused where its GEMMs are bf16 and
// cuDNN supports the shape (a warning, once per shape, says why not where
// it does not), else tiled (kernels/cuda/flash_attention.h); with
// gpu_attention = tiled the tiled kernel; with materialized the reference,
// for KV = H (tiled else).
// The backward must be given the kernel its forward ran. qkv, out and dqkv may
// be bf16 (the fused kernel's forward takes qkv and out in one type); dout
// is f32.
enum class AttentionKernel { materialized, fused, tiled };
AttentionKernel attention_kernel(Device device, int64_t B, int64_t T, int64_t C, int64_t n_head, int64_t n_kv_head = 0);
// f32 elements `att` must hold for `kernel`, with qkv and out of dtype io
// (C = H hs, the query channels).
int64_t attention_saved_floats(AttentionKernel kernel, int64_t B, int64_t T, int64_t C, int64_t n_head,
                               DType io = DType::f32, int64_t n_kv_head = 0);
// f32 elements of the backward's scratch for `kernel` on `device`.
int64_t attention_scratch_floats(AttentionKernel kernel, Device device, int64_t B, int64_t T, int64_t C,
                                 int64_t n_head);
void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int64_t n_head,
                       AttentionKernel kernel = AttentionKernel::materialized, int64_t n_kv_head = 0);
// qkv and out: the forward's, unchanged since.
void attention_backward(const Tensor& dqkv, const Tensor& scratch, const Tensor& dout, const Tensor& qkv,
                        const Tensor& out, const Tensor& att, int64_t n_head,
                        AttentionKernel kernel = AttentionKernel::materialized, int64_t n_kv_head = 0);

// A Llama Block's ops (kernels/cpu/rmsnorm.h, rope.h, swiglu.h).
// RMSNorm over the last dimension: in [..., C] f32 viewed as [rows, C];
// weight [C]; rstd [rows] saved for backward; out may be bf16.
void rmsnorm_forward(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight, float eps);
// sum_out = a + b (f32; may be a or b itself), then rmsnorm_forward of the
// sum into out: the bits of add followed by rmsnorm_forward.
void residual_rmsnorm_forward(const Tensor& sum_out, const Tensor& out, const Tensor& rstd, const Tensor& a,
                              const Tensor& b, const Tensor& weight, float eps);
// din (f32, required) := the input gradient, plus dresidual where that is
// defined (din may be dresidual itself); dweight overwritten or added to.
void rmsnorm_backward(const Tensor& din, const Tensor& dweight, const Tensor& dout, const Tensor& in,
                      const Tensor& weight, const Tensor& rstd, const Tensor& dresidual, bool accumulate);
// Rotary positions in place on x [B, T, row] (f32 or bf16): the first
// n_heads heads of hs columns of every row, rotate-half pairing, position t
// turned by t theta^(-2i/hs). rope_backward turns a gradient back.
void rope_forward(const Tensor& x, int64_t n_heads, int64_t hs, float theta);
void rope_backward(const Tensor& dx, int64_t n_heads, int64_t hs, float theta);
// SwiGLU: gu [..., 2F] (gate, then up), h [..., F] = silu(gate) * up; dgu
// from dh and the forward's gu. Each f32 or bf16.
void swiglu_forward(const Tensor& h, const Tensor& gu);
void swiglu_backward(const Tensor& dgu, const Tensor& dh, const Tensor& gu);

// out = a + b, elementwise (out may alias a or b): residual connections.
void add(const Tensor& out, const Tensor& a, const Tensor& b);

double sum_squares(const Tensor& x);  // read back to the host (a GPU: waits)
// sq [1] f32 := float(sum of squares of x), on x's device, without a wait.
void sum_squares(const Tensor& sq, const Tensor& x);
// Global-norm clipping on the gradients' own device, without a host wait
// (cpu::clip_to_norm): by the norm of grads itself, summed in double, or by
// a squared norm sq [1] f32 on the same device (FSDP's, summed over shards).
void clip_to_max_norm(const Tensor& grads, double max_norm);
void clip_to_squared_norm(const Tensor& grads, const Tensor& sq, double max_norm);
// out := in converted between f32 and bf16 (round to nearest even), on
// either device: DDP's bf16 wire format.
void convert(const Tensor& out, const Tensor& in);
void scale_inplace(const Tensor& x, float s);

}  // namespace shardtrain::ops
