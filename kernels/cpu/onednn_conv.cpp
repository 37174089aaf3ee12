#include "kernels/cpu/onednn_conv.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/vec_math.h"
#include "runtime/core/error.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace shardtrain::cpu {
namespace {

using dnnl::memory;
using kernels::Conv2dShape;
using Tag = memory::format_tag;
using Type = memory::data_type;

// The backward kernels of oneDNN 2.6 on AVX2 ran the CNN's first layer (one
// input channel) several times slower than im2col + GEMM: with fewer input
// channels than a channel block, the blocked weight gradient has nothing to
// vectorize over (docs/BENCHMARKS.md, "oneDNN for the CPU's convolutions and
// products").
constexpr int64_t kMinBackwardChannels = 8;

// oneDNN's own im2col + GEMM and reference kernels are not what this file is
// for: im2col + OpenBLAS is the fallback.
bool direct(const char* impl) {
  const std::string name = impl;
  return name.rfind("gemm", 0) != 0 && name.rfind("ref", 0) != 0;
}

std::atomic<size_t> g_workspace_bytes{0};

// One thread's buffer for the blocked copies and scratchpads, 64-byte
// aligned, carved front to back for each call.
class Scratch {
 public:
  ~Scratch() { g_workspace_bytes -= capacity_; }
  void begin(size_t bytes) {
    if (bytes > capacity_) {
      g_workspace_bytes += bytes - capacity_;
      buffer_.reset(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      ST_CHECK(buffer_ != nullptr, "oneDNN convolution: cannot allocate a {} byte workspace", bytes);
      capacity_ = bytes;
    }
    used_ = 0;
  }
  void* take(size_t bytes) {
    void* p = buffer_.get() + used_;
    used_ += round_up(bytes);
    ST_ASSERT(used_ <= capacity_);
    return p;
  }
  static size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> buffer_;
  size_t capacity_ = 0, used_ = 0;
};

// Whether this process's products are bf16 and oneDNN has bf16 kernels
// for this CPU: then the convolutions' operands are bf16 too. Without
// those kernels bf16 products keep im2col, whose GEMMs round the operands.
bool bf16_operands() { return gemm_precision() == GemmPrecision::bf16 && onednn_native_bf16(); }

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The shape, and whether the operands are bf16.
using ConvKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

struct Plan {
  memory::desc user_src, user_dst, user_weight, bias;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc data_pd;
  dnnl::convolution_backward_weights::primitive_desc weights_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data data;
  dnnl::convolution_backward_weights weights;
  OnednnConvRoute route;
  bool bf16 = false;
  std::vector<float> zero_bias;  // the forward's bias where the layer has none
  struct Reorder {
    memory::desc from, to;
    dnnl::reorder primitive;
  };
  std::vector<Reorder> reorders;
};

// bf16: the operands (input, weight, output gradient) are rounded to bf16
// by the reorders into oneDNN's layouts, as every bf16 product rounds them
// (gemm.h), and the results (output, gradients) come back in f32.
Plan build(const Conv2dShape& s, bool bf16) {
  Plan p;
  p.bf16 = bf16;
  const memory::dims src{s.B, s.C, s.H, s.W}, dst{s.B, s.OC, s.OH(), s.OW()}, weight{s.OC, s.C, s.K, s.K};
  const memory::dims strides{s.stride, s.stride}, pad{s.pad, s.pad};
  p.user_src = memory::desc(src, Type::f32, Tag::nchw);
  p.user_dst = memory::desc(dst, Type::f32, Tag::nchw);
  p.user_weight = memory::desc(weight, Type::f32, Tag::oihw);
  p.bias = memory::desc({s.OC}, Type::f32, Tag::a);
  p.zero_bias.assign(size_t(s.OC), 0.0f);
  // Layouts left to oneDNN ("any"): it picks the blocked ones its kernels use.
  const Type operand = bf16 ? Type::bf16 : Type::f32;
  const memory::desc any_src(src, operand, Tag::any), any_dst(dst, Type::f32, Tag::any),
      any_weight(weight, operand, Tag::any), any_diff_dst(dst, operand, Tag::any),
      any_diff_src(src, Type::f32, Tag::any), any_diff_weight(weight, Type::f32, Tag::any);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto algo = dnnl::algorithm::convolution_direct;
  p.fwd_pd = dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, any_src, any_weight, p.bias, any_dst,
                                      strides, pad, pad),
      attr, onednn_engine());
  p.data_pd = dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(algo, any_diff_src, any_weight, any_diff_dst, strides, pad, pad), attr,
      onednn_engine(), p.fwd_pd);
  p.weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(algo, any_src, any_diff_weight, p.bias, any_diff_dst, strides, pad, pad),
      attr, onednn_engine(), p.fwd_pd);
  p.route.forward = direct(p.fwd_pd.impl_info_str());
  p.route.backward =
      s.C >= kMinBackwardChannels && direct(p.data_pd.impl_info_str()) && direct(p.weights_pd.impl_info_str());
  if (p.route.forward) p.fwd = dnnl::convolution_forward(p.fwd_pd);
  if (p.route.backward) {
    p.data = dnnl::convolution_backward_data(p.data_pd);
    p.weights = dnnl::convolution_backward_weights(p.weights_pd);
  }
  return p;
}

Plan& plan_for(const Conv2dShape& s, bool bf16) {
  // Before any primitive exists: oneDNN sizes its kernels' work split and
  // scratchpads for the thread count at creation.
  match_onednn_threads();
  thread_local std::map<ConvKey, Plan> plans;
  const ConvKey key{s.B, s.C, s.H, s.W, s.OC, s.K, s.stride, s.pad, bf16};
  auto it = plans.find(key);
  if (it == plans.end()) {
    try {
      it = plans.emplace(key, build(s, bf16)).first;
    } catch (const dnnl::error& e) {
      throw Error(fmt::format("oneDNN convolution {}x{}x{}x{} -> {} channels, kernel {} stride {} pad {}, {} ({}): {}",
                              s.B, s.C, s.H, s.W, s.OC, s.K, s.stride, s.pad, bf16 ? "bf16" : "f32", onednn_version(),
                              e.what()));
    }
  }
  return it->second;
}

void reorder(Plan& p, memory from, memory to) {
  for (Plan::Reorder& r : p.reorders)
    if (r.from == from.get_desc() && r.to == to.get_desc()) {
      r.primitive.execute(onednn_stream(), from, to);
      return;
    }
  p.reorders.push_back({from.get_desc(), to.get_desc(), dnnl::reorder(from, to)});
  p.reorders.back().primitive.execute(onednn_stream(), from, to);
}

size_t bytes_if(const memory::desc& wanted, const memory::desc& user) {
  return wanted == user ? 0 : Scratch::round_up(wanted.get_size());
}

// `user` data as the primitive wants it: itself where the layouts agree,
// else a reordered copy in the scratch (copy_in: whether to fill it).
memory as_wanted(Plan& p, const memory::desc& wanted, const memory::desc& user, const void* data, bool copy_in) {
  memory user_mem(user, onednn_engine(), const_cast<void*>(data));
  if (wanted == user) return user_mem;
  memory copy(wanted, onednn_engine(), scratch().take(wanted.get_size()));
  if (copy_in) reorder(p, user_mem, copy);
  return copy;
}

memory scratchpad(const memory::desc& desc) { return {desc, onednn_engine(), scratch().take(desc.get_size())}; }

// The layout of the forward's output where its channels lie innermost in
// blocks of 16 (NHWC, nChw16c); none otherwise.
std::optional<ChannelBlocks16> channel_blocks(const Plan& p, const Conv2dShape& s) {
  const memory::desc& dst = p.fwd_pd.dst_desc();
  const memory::dims dims{s.B, s.OC, s.OH(), s.OW()};
  const int64_t pixels = s.OH() * s.OW();
  if (s.OC % 16 != 0) return std::nullopt;
  if (dst == memory::desc(dims, Type::f32, Tag::nhwc)) return ChannelBlocks16{pixels * s.OC, 16, s.OC};
  if (dst == memory::desc(dims, Type::f32, Tag::nChw16c)) return ChannelBlocks16{s.OC * pixels, pixels * 16, 16};
  return std::nullopt;
}

// Where the forward's output goes: `out` (NCHW), or with `pooled` the
// 2x2/2 max-pool of it in oneDNN's layout into pooled->out and
// pooled->argmax, or with neither nowhere (left in the scratch).
struct PooledOut {
  float* out;
  int32_t* argmax;
  bool relu;
};

void forward_chunk(float* out, const float* in, const float* weight, const float* bias, const Conv2dShape& s,
                   const PooledOut* pooled = nullptr) {
  Plan& p = plan_for(s, bf16_operands());
  ST_ASSERT(p.route.forward);
  const auto& pd = p.fwd_pd;
  scratch().begin(bytes_if(pd.src_desc(), p.user_src) + bytes_if(pd.weights_desc(), p.user_weight) +
                  bytes_if(pd.dst_desc(), p.user_dst) + Scratch::round_up(pd.scratchpad_desc().get_size()));
  const memory src = as_wanted(p, pd.src_desc(), p.user_src, in, true);
  const memory w = as_wanted(p, pd.weights_desc(), p.user_weight, weight, true);
  const memory dst = as_wanted(p, pd.dst_desc(), p.user_dst, out, false);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                       {DNNL_ARG_WEIGHTS, w},
                                       {DNNL_ARG_DST, dst},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad(pd.scratchpad_desc())}};
  // No bias: the plan's zeros, so that one primitive serves both.
  args.emplace(DNNL_ARG_BIAS, memory(p.bias, onednn_engine(), const_cast<float*>(bias ? bias : p.zero_bias.data())));
  p.fwd.execute(onednn_stream(), args);
  if (pooled != nullptr) {
    onednn_stream().wait();
    const std::optional<ChannelBlocks16> layout = channel_blocks(p, s);
    ST_ASSERT(layout.has_value());
    maxpool_2x2_from_channel_blocks(pooled->out, pooled->argmax, static_cast<const float*>(dst.get_data_handle()),
                                    {s.B, s.OC, s.OH(), s.OW(), 2, 2}, *layout, pooled->relu);
    return;
  }
  if (out != nullptr && !(pd.dst_desc() == p.user_dst)) reorder(p, dst, memory(p.user_dst, onednn_engine(), out));
  onednn_stream().wait();
}

void backward_chunk(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                    const Conv2dShape& s, bool accumulate) {
  Plan& p = plan_for(s, bf16_operands());
  ST_ASSERT(p.route.backward);
  const auto& wpd = p.weights_pd;
  const auto& dpd = p.data_pd;
  // The weight gradient lands in the scratch when it must be added to
  // dweight or reordered; the bias gradient when it must be added.
  const bool dw_direct = !accumulate && wpd.diff_weights_desc() == p.user_weight;
  const size_t bias_bytes = Scratch::round_up(size_t(s.OC) * sizeof(float));
  size_t bytes = bytes_if(wpd.src_desc(), p.user_src) + bytes_if(wpd.diff_dst_desc(), p.user_dst) +
                 (dw_direct ? 0 : Scratch::round_up(wpd.diff_weights_desc().get_size())) +
                 (accumulate ? Scratch::round_up(p.user_weight.get_size()) : 0) + bias_bytes +
                 Scratch::round_up(wpd.scratchpad_desc().get_size());
  if (din != nullptr)
    bytes += (dpd.diff_dst_desc() == wpd.diff_dst_desc() ? 0 : bytes_if(dpd.diff_dst_desc(), p.user_dst)) +
             bytes_if(dpd.weights_desc(), p.user_weight) + bytes_if(dpd.diff_src_desc(), p.user_src) +
             Scratch::round_up(dpd.scratchpad_desc().get_size());
  scratch().begin(bytes);

  const memory src = as_wanted(p, wpd.src_desc(), p.user_src, in, true);
  const memory diff_dst = as_wanted(p, wpd.diff_dst_desc(), p.user_dst, dout, true);
  const memory user_dw(p.user_weight, onednn_engine(), dweight);
  const memory dw =
      dw_direct ? user_dw
                : memory(wpd.diff_weights_desc(), onednn_engine(), scratch().take(wpd.diff_weights_desc().get_size()));
  float* db = static_cast<float*>(scratch().take(bias_bytes));
  p.weights.execute(onednn_stream(), {{DNNL_ARG_SRC, src},
                                      {DNNL_ARG_DIFF_DST, diff_dst},
                                      {DNNL_ARG_DIFF_WEIGHTS, dw},
                                      {DNNL_ARG_DIFF_BIAS, memory(p.bias, onednn_engine(), db)},
                                      {DNNL_ARG_SCRATCHPAD, scratchpad(wpd.scratchpad_desc())}});
  if (accumulate) {
    // The gradient in OIHW beside dweight, then added on.
    const memory plain(p.user_weight, onednn_engine(), scratch().take(p.user_weight.get_size()));
    reorder(p, dw, plain);
    onednn_stream().wait();
    const float* g = static_cast<const float*>(plain.get_data_handle());
    const int64_t n = s.OC * s.C * s.K * s.K;
    for (int64_t i = 0; i < n; ++i) dweight[i] += g[i];
  } else if (!dw_direct) {
    reorder(p, dw, user_dw);
  }
  onednn_stream().wait();
  // bf16: oneDNN summed the rounded output gradient; the bias gradient is
  // the f32 one's sum, as im2col's (a sum, no product to speed up): each
  // sample's plane in 8 partial sums, as im2col's, the samples added in
  // double. (One chain of dependent additions over the whole batch waits
  // out each addition's latency: several cycles an element.)
  if (p.bf16) {
    const int64_t P = s.OH() * s.OW();
    for (int64_t oc = 0; oc < s.OC; ++oc) {
      double sum = 0;
      for (int64_t b = 0; b < s.B; ++b) {
        const float* g = dout + (b * s.OC + oc) * P;
        sum += double(detail::lane_sum(P, [&](int64_t i) { return g[i]; }));
      }
      db[oc] = float(sum);
    }
  }
  if (dbias != nullptr)
    for (int64_t oc = 0; oc < s.OC; ++oc) dbias[oc] = accumulate ? dbias[oc] + db[oc] : db[oc];

  if (din == nullptr) return;
  const memory data_diff_dst =
      dpd.diff_dst_desc() == wpd.diff_dst_desc() ? diff_dst : as_wanted(p, dpd.diff_dst_desc(), p.user_dst, dout, true);
  const memory w = as_wanted(p, dpd.weights_desc(), p.user_weight, weight, true);
  const memory diff_src = as_wanted(p, dpd.diff_src_desc(), p.user_src, din, false);
  p.data.execute(onednn_stream(), {{DNNL_ARG_DIFF_DST, data_diff_dst},
                                   {DNNL_ARG_WEIGHTS, w},
                                   {DNNL_ARG_DIFF_SRC, diff_src},
                                   {DNNL_ARG_SCRATCHPAD, scratchpad(dpd.scratchpad_desc())}});
  if (!(dpd.diff_src_desc() == p.user_src)) reorder(p, diff_src, memory(p.user_src, onednn_engine(), din));
  onednn_stream().wait();
}

// The batch goes to oneDNN in chunks of at most this many samples: the
// blocked copies grow with the batch, and an evaluation's batch can be
// thousands of samples (the CNN's second layer: 12 MB of copies per 128).
constexpr int64_t kChunk = 128;

Conv2dShape chunk_of(const Conv2dShape& s, int64_t samples) {
  Conv2dShape c = s;
  c.B = samples;
  return c;
}

// fn(first sample, chunk shape) for each chunk of s's batch.
template <class Fn>
void for_each_chunk(const Conv2dShape& s, Fn fn) {
  for (int64_t b = 0; b < s.B; b += kChunk) fn(b, chunk_of(s, std::min(kChunk, s.B - b)));
}

// The shapes of s's first chunk and its last (which may be shorter): what
// holds for the plans of both holds for the whole batch.
std::array<Conv2dShape, 2> end_chunks(const Conv2dShape& s) {
  return {chunk_of(s, std::min(kChunk, s.B)), chunk_of(s, s.B % kChunk == 0 ? std::min(kChunk, s.B) : s.B % kChunk)};
}

}  // namespace

OnednnConvRoute onednn_conv_route(const Conv2dShape& s) {
  const bool bf16 = bf16_operands();
  if (!onednn_convolutions() || s.B == 0 || (gemm_precision() != GemmPrecision::f32 && !bf16)) return {};
  const auto [first_chunk, last_chunk] = end_chunks(s);
  const OnednnConvRoute first = plan_for(first_chunk, bf16).route, last = plan_for(last_chunk, bf16).route;
  return {first.forward && last.forward, first.backward && last.backward};
}

void onednn_conv_forward(float* out, const float* in, const float* weight, const float* bias, const Conv2dShape& s) {
  record_conv({s, false, false});
  const int64_t in_sample = s.C * s.H * s.W, out_sample = s.OC * s.OH() * s.OW();
  for_each_chunk(s, [&](int64_t b, const Conv2dShape& c) {
    forward_chunk(out + b * out_sample, in + b * in_sample, weight, bias, c);
  });
}

bool onednn_conv_pools(const Conv2dShape& s) {
  if (!onednn_conv_route(s).forward || s.OH() % 2 != 0 || s.OW() % 2 != 0) return false;
  const bool bf16 = bf16_operands();
  const auto [first, last] = end_chunks(s);
  return channel_blocks(plan_for(first, bf16), first).has_value() &&
         channel_blocks(plan_for(last, bf16), last).has_value();
}

void onednn_conv_maxpool_forward(float* pooled, int32_t* argmax, const float* in, const float* weight,
                                 const float* bias, const Conv2dShape& s, bool relu) {
  ST_CHECK(onednn_conv_pools(s), "onednn_conv_maxpool_forward: this convolution's output is not pooled in place");
  record_conv({s, false, false, true});
  const int64_t in_sample = s.C * s.H * s.W, pooled_sample = s.OC * (s.OH() / 2) * (s.OW() / 2);
  for_each_chunk(s, [&](int64_t b, const Conv2dShape& c) {
    const PooledOut to{pooled + b * pooled_sample, argmax + b * pooled_sample, relu};
    forward_chunk(nullptr, in + b * in_sample, weight, bias, c, &to);
  });
}

void onednn_conv_forward_in_its_layout(const float* in, const float* weight, const float* bias, const Conv2dShape& s) {
  const int64_t in_sample = s.C * s.H * s.W;
  for_each_chunk(s,
                 [&](int64_t b, const Conv2dShape& c) { forward_chunk(nullptr, in + b * in_sample, weight, bias, c); });
}

void onednn_conv_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                          const float* weight, const Conv2dShape& s, bool accumulate) {
  record_conv({s, true, din != nullptr});
  const int64_t in_sample = s.C * s.H * s.W, out_sample = s.OC * s.OH() * s.OW();
  // The weight and bias gradients sum over the chunks: the first chunk
  // overwrites them unless accumulating, the others add.
  for_each_chunk(s, [&](int64_t b, const Conv2dShape& c) {
    backward_chunk(din ? din + b * in_sample : nullptr, dweight, dbias, dout + b * out_sample, in + b * in_sample,
                   weight, c, accumulate || b > 0);
  });
}

size_t onednn_conv_workspace_bytes() { return g_workspace_bytes; }

}  // namespace shardtrain::cpu
