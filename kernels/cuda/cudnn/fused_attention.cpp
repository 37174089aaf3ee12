// cuDNN's SDPA forward and backward graphs, built once per shape through the
// frontend's graph API and cached; see kernels/cuda/fused_attention.h.
#include "kernels/cuda/fused_attention.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/cudnn/cudnn_library.h"
#include "kernels/cuda/elementwise.h"

#include <cudnn_frontend.h>

#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace shardtrain::cuda {
namespace {

namespace fe = cudnn_frontend;
using GraphPtr = std::shared_ptr<fe::graph::Graph>;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;

struct Dims {
  int64_t B, T, C, NH, NKV;  // NKV key/value heads (NKV == NH: multi-head attention)
  int64_t hs() const { return C / NH; }
  int64_t kv() const { return NKV * hs(); }     // channels of K, and of V
  int64_t row() const { return C + 2 * kv(); }  // qkv's channels per token
  // Byte offsets inside `saved`: log-sum-exp rows, then (f32 io only) the
  // bf16 copies of qkv and O.
  size_t stats_bytes() const { return size_t(B * NH * T) * sizeof(float); }
  size_t qkv_offset() const { return aligned(stats_bytes()); }
  size_t out_offset() const { return qkv_offset() + aligned(size_t(B * T * row()) * 2); }
  size_t saved_bytes(bool bf16_io) const { return bf16_io ? stats_bytes() : out_offset() + size_t(B * T * C) * 2; }
  Key key() const { return {B, T, C, NH, NKV}; }
};

// The API's NKV = 0 is NH.
Dims dims_of(int64_t B, int64_t T, int64_t C, int64_t NH, int64_t NKV) { return {B, T, C, NH, NKV == 0 ? NH : NKV}; }

// `heads` heads of hs channels side by side from the pointer the variant
// pack gives (Q, K or V inside qkv, or O), seen as [B, heads, T, hs]; `row`
// is the distance between tokens (d.row() in qkv, C in O).
fe::graph::Tensor_attributes head_view(const char* name, int64_t uid, const Dims& d, int64_t heads, int64_t row) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({d.B, heads, d.T, d.hs()})
      .set_stride({d.T * row, d.hs(), row, 1});
}

std::vector<int64_t> stats_dims(const Dims& d) { return {d.B, d.NH, d.T, 1}; }
std::vector<int64_t> stats_strides(const Dims& d) { return {d.NH * d.T, d.T, 1, 1}; }

GraphPtr new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

float scale_of(const Dims& d) { return 1.0f / std::sqrt(float(d.hs())); }  // as the CPU computes it

// K and V with fewer heads than Q make cuDNN's SDPA grouped-query
// attention: query head h reads key/value head h / (NH / NKV), as the CPU's
// kernel (kernels/cpu/flash_attention.h) does.
GraphPtr forward_graph(const Dims& d) {
  GraphPtr g = new_graph();
  auto q = g->tensor(head_view("Q", kQ, d, d.NH, d.row()));
  auto k = g->tensor(head_view("K", kK, d, d.NKV, d.row()));
  auto v = g->tensor(head_view("V", kV, d, d.NKV, d.row()));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("attention")
                     .set_generate_stats(true)
                     .set_causal_mask(true)
                     .set_attn_scale(scale_of(d));
  auto [o, stats] = g->sdpa(q, k, v, options);
  o->set_output(true).set_uid(kO).set_dim({d.B, d.NH, d.T, d.hs()}).set_stride({d.T * d.C, d.hs(), d.C, 1});
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim(stats_dims(d))
      .set_stride(stats_strides(d));
  return g;
}

// dK and dV have K's and V's NKV heads: cuDNN sums each over its group's
// query heads.
GraphPtr backward_graph(const Dims& d) {
  GraphPtr g = new_graph();
  auto q = g->tensor(head_view("Q", kQ, d, d.NH, d.row()));
  auto k = g->tensor(head_view("K", kK, d, d.NKV, d.row()));
  auto v = g->tensor(head_view("V", kV, d, d.NKV, d.row()));
  auto o = g->tensor(head_view("O", kO, d, d.NH, d.C));
  auto dout = g->tensor(head_view("dO", kDO, d, d.NH, d.C));
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("stats")
                             .set_uid(kStats)
                             .set_dim(stats_dims(d))
                             .set_stride(stats_strides(d))
                             .set_data_type(fe::DataType_t::FLOAT));
  // Deterministic: the default Hopper kernels sum dQ with atomics, so the
  // same step would not give the same bits twice.
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_backward")
                     .set_causal_mask(true)
                     .set_attn_scale(scale_of(d))
                     .set_deterministic_algorithm(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, options);
  const std::vector<int64_t> strides{d.T * d.row(), d.hs(), d.row(), 1};
  dq->set_output(true).set_uid(kDQ).set_dim({d.B, d.NH, d.T, d.hs()}).set_stride(strides);
  dk->set_output(true).set_uid(kDK).set_dim({d.B, d.NKV, d.T, d.hs()}).set_stride(strides);
  dv->set_output(true).set_uid(kDV).set_dim({d.B, d.NKV, d.T, d.hs()}).set_stride(strides);
  return g;
}

// "" when built, else the step that failed and cuDNN's message.
std::string build(fe::graph::Graph& g, cudnnHandle_t handle, int64_t* workspace) {
  const auto step = [](const char* what, fe::error_t e) {
    return e.is_good() ? std::string() : std::string(what) + ": " + e.get_message();
  };
  std::string why = step("validate", g.validate());
  if (why.empty()) why = step("operation graph", g.build_operation_graph(handle));
  if (why.empty()) why = step("execution plans", g.create_execution_plans({fe::HeurMode_t::A}));
  if (why.empty()) why = step("support", g.check_support());
  if (why.empty()) why = step("plans", g.build_plans());
  if (why.empty()) why = step("workspace", g.get_workspace_size(*workspace));
  return why;
}

struct Graphs {
  std::string unavailable;  // "" when both graphs are built
  GraphPtr forward, backward;
  int64_t forward_workspace = 0, backward_workspace = 0;
};

Graphs make_graphs(const Dims& d) {
  Graphs out;
  if (d.hs() % 8 != 0 || d.hs() > 128) {
    out.unavailable =
        "head size " + std::to_string(d.hs()) + ": cuDNN's fused attention takes multiples of 8 up to 128";
    return out;
  }
  // Grouped K and V need cuDNN 8.9.7 or newer, which cudnn_handle's cuDNN 9
  // covers; whatever a given cuDNN version or GPU declines beyond that, the
  // frontend's checks name in build().
  if (d.NKV <= 0 || d.NH % d.NKV != 0) {
    out.unavailable = std::to_string(d.NH) + " query heads over " + std::to_string(d.NKV) +
                      " key/value heads: cuDNN's grouped-query attention needs each key/value head to serve the same "
                      "number of query heads";
    return out;
  }
  std::string why;
  cudnnHandle_t handle = cudnn_handle(&why);
  if (handle == nullptr) {
    out.unavailable = why;
    return out;
  }
  try {
    out.forward = forward_graph(d);
    why = build(*out.forward, handle, &out.forward_workspace);
    if (why.empty()) {
      out.backward = backward_graph(d);
      why = build(*out.backward, handle, &out.backward_workspace);
    }
  } catch (const std::exception& e) {  // the frontend throws where a loaded symbol is missing
    why = e.what();
  }
  if (!why.empty()) out.unavailable = "cuDNN declined the attention graph (" + why + ")";
  return out;
}

const Graphs& graphs(const Dims& d) {
  static std::mutex mu;
  static std::map<Key, Graphs> cache;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(d.key());
  if (it == cache.end()) it = cache.emplace(d.key(), make_graphs(d)).first;
  return it->second;
}

const Graphs& built(const Dims& d, const char* fn) {
  const Graphs& g = graphs(d);
  ST_CUDA_REQUIRE(g.unavailable.empty(), std::string(fn) + ": " + g.unavailable);
  return g;
}

void execute(const fe::graph::Graph& g, int64_t workspace_bytes, std::unordered_map<int64_t, void*>& pack,
             const char* fn) {
  void* workspace = workspace_bytes > 0 ? scratch(ScratchSlot::attention_workspace, size_t(workspace_bytes)) : nullptr;
  fe::error_t e = g.execute(cudnn_handle(nullptr), pack, workspace);
  ST_CUDA_REQUIRE(e.is_good(), std::string(fn) + ": cuDNN: " + e.get_message());
}

}  // namespace

std::string fused_attention_unavailable(int64_t B, int64_t T, int64_t C, int64_t NH, int64_t NKV) {
  if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0 || NKV < 0) return "no attention shape";
  return graphs(dims_of(B, T, C, NH, NKV)).unavailable;
}

size_t fused_attention_saved_bytes(int64_t B, int64_t T, int64_t C, int64_t NH, bool bf16_io, int64_t NKV) {
  return dims_of(B, T, C, NH, NKV).saved_bytes(bf16_io);
}

void fused_attention_forward(void* out, void* saved, const void* qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                             bool bf16_io, int64_t NKV) {
  const Dims d = dims_of(B, T, C, NH, NKV);
  const Graphs& g = built(d, "fused_attention_forward");
  auto* base = static_cast<unsigned char*>(saved);
  // bf16 qkv and O where they are; f32 ones through bf16 copies in `saved`.
  void* qkv16 = const_cast<void*>(qkv);  // cuDNN takes const-less pointers; it only reads Q, K and V
  void* out16 = out;
  if (!bf16_io) {
    qkv16 = base + d.qkv_offset();
    out16 = base + d.out_offset();
    f32_to_bf16(static_cast<bf16*>(qkv16), static_cast<const float*>(qkv), B * T * d.row());
  }
  auto* q = static_cast<uint16_t*>(qkv16);
  std::unordered_map<int64_t, void*> pack{{kQ, q}, {kK, q + C}, {kV, q + C + d.kv()}, {kO, out16}, {kStats, base}};
  execute(*g.forward, g.forward_workspace, pack, "fused_attention_forward");
  if (!bf16_io) bf16_to_f32(static_cast<float*>(out), static_cast<const bf16*>(out16), B * T * C);
}

void fused_attention_backward(void* dqkv, const float* dout, const void* saved, const void* qkv, const void* out,
                              int64_t B, int64_t T, int64_t C, int64_t NH, bool bf16_io, bool dqkv_bf16, int64_t NKV) {
  const Dims d = dims_of(B, T, C, NH, NKV);
  const Graphs& g = built(d, "fused_attention_backward");
  // cuDNN takes const-less pointers; it only reads the inputs.
  auto* base = const_cast<unsigned char*>(static_cast<const unsigned char*>(saved));
  auto* q = static_cast<uint16_t*>(bf16_io ? const_cast<void*>(qkv) : base + d.qkv_offset());
  void* out16 = bf16_io ? const_cast<void*>(out) : base + d.out_offset();
  const size_t dout_bytes = aligned(size_t(B * T * C) * 2);
  // dO in bf16, and dQKV's bf16 values unless the caller's buffer takes them.
  const size_t grads_bytes = dout_bytes + (dqkv_bf16 ? 0 : size_t(B * T * d.row()) * 2);
  auto* grads = static_cast<unsigned char*>(scratch(ScratchSlot::attention_grads, grads_bytes));
  auto* dout16 = reinterpret_cast<bf16*>(grads);
  auto* dq = dqkv_bf16 ? static_cast<uint16_t*>(dqkv) : reinterpret_cast<uint16_t*>(grads + dout_bytes);
  f32_to_bf16(dout16, dout, B * T * C);
  const int64_t v_at = C + d.kv();  // V's first channel, in qkv and in dqkv
  std::unordered_map<int64_t, void*> pack{{kQ, q},       {kK, q + C}, {kV, q + v_at}, {kO, out16},     {kStats, base},
                                          {kDO, dout16}, {kDQ, dq},   {kDK, dq + C},  {kDV, dq + v_at}};
  execute(*g.backward, g.backward_workspace, pack, "fused_attention_backward");
  if (!dqkv_bf16) bf16_to_f32(static_cast<float*>(dqkv), reinterpret_cast<const bf16*>(dq), B * T * d.row());
}

}  // namespace shardtrain::cuda
