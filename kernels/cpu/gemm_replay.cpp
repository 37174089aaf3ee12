#include "kernels/cpu/gemm_replay.h"

#include "runtime/core/dtype.h"
#include "runtime/core/rng.h"

#include <algorithm>

namespace shardtrain::cpu {
namespace {

// A call made up rather than recorded has no strides: dense.
int64_t stride(int64_t recorded, int64_t cols) { return recorded > 0 ? recorded : cols; }

}  // namespace

std::array<GemmReplay::Operand, 4> GemmReplay::operands(const GemmCall& c) {
  // A batch's operand spans its last product's end.
  auto operand = [&c](const void* address, int64_t rows, int64_t cols, int64_t ld, int64_t between, bool is_bf16) {
    const int64_t one = rows == 0 || cols == 0 ? 0 : (rows - 1) * stride(ld, cols) + cols;
    const int64_t elements = one == 0 || c.batch == 0 ? 0 : (c.batch - 1) * between + one;
    return Operand{address, elements * int64_t(is_bf16 ? sizeof(bf16) : sizeof(float)), is_bf16};
  };
  return {operand(c.a, c.trans_a ? c.K : c.M, c.trans_a ? c.M : c.K, c.lda, c.stride_a, c.bf16_operands),
          operand(c.b, c.trans_b ? c.N : c.K, c.trans_b ? c.K : c.N, c.ldb, c.stride_b, c.bf16_operands),
          operand(c.c, c.M, c.N, c.ldc, c.stride_c, false), operand(c.bias, c.bias ? 1 : 0, c.N, 0, 0, false)};
}

GemmReplay::GemmReplay(const std::vector<GemmCall>& calls) : calls_(calls) {
  struct Extent {
    uintptr_t end = 0;
    bool bf16 = false;
  };
  std::map<uintptr_t, Extent> extents;  // by start, in bytes of the step's memory
  for (const GemmCall& c : calls_)
    for (const Operand& o : operands(c))
      if (o.bytes > 0) {
        Extent& e = extents[uintptr_t(o.address)];
        e.end = std::max(e.end, uintptr_t(o.address) + uintptr_t(o.bytes));
        e.bf16 = e.bf16 || o.bf16;
      }
  for (const auto& [start, e] : extents) {  // in order of address: the overlapping joined
    if (!stretches_.empty() && start < stretches_.rbegin()->second.end) {
      Stretch& last = stretches_.rbegin()->second;
      last.end = std::max(last.end, e.end);
      last.bf16 = last.bf16 || e.bf16;
    } else {
      Stretch& s = stretches_[start];
      s.end = e.end;
      s.bf16 = e.bf16;
    }
  }
  Rng rng(stream_key(7, uint64_t(calls_.size()), uint64_t(stretches_.size())));
  for (auto& [start, stretch] : stretches_) {
    // 64-byte aligned, as the runtime's allocator aligns a tensor.
    const size_t bytes = stretch.end - start;
    stretch.memory.resize((bytes + sizeof(float) - 1) / sizeof(float) + 16);
    auto* raw = reinterpret_cast<std::byte*>(stretch.memory.data());
    stretch.base = raw + (64 - uintptr_t(raw) % 64) % 64;
    if (stretch.bf16) {
      auto* values = reinterpret_cast<bf16*>(stretch.base);
      for (size_t i = 0; i < bytes / sizeof(bf16); ++i) values[i] = to_bf16(rng.uniform(-1, 1));
    } else {
      for (float& x : stretch.memory) x = rng.uniform(-1, 1);
    }
  }
}

int64_t GemmReplay::bytes() const {
  int64_t total = 0;
  for (const auto& [start, stretch] : stretches_) total += int64_t(stretch.end - start);
  return total;
}

void* GemmReplay::at_bytes(const void* address) {
  auto it = stretches_.upper_bound(uintptr_t(address));
  if (it == stretches_.begin()) return nullptr;  // an empty operand: never read
  --it;
  return it->second.base + (uintptr_t(address) - it->first);
}

void GemmReplay::run() {
  for (const GemmCall& c : calls_) {
    const int64_t lda = stride(c.lda, c.trans_a ? c.M : c.K), ldb = stride(c.ldb, c.trans_b ? c.K : c.N);
    float* C = at(c.c);
    if (c.batch != 1 && c.bf16_operands)
      gemm_bf16_batched(c.batch, c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, at(static_cast<const bf16*>(c.a)), lda,
                        c.stride_a, at(static_cast<const bf16*>(c.b)), ldb, c.stride_b, c.beta, C, stride(c.ldc, c.N),
                        c.stride_c);
    else if (c.batch != 1)
      gemm_batched(c.batch, c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, at(static_cast<const float*>(c.a)), lda,
                   c.stride_a, at(static_cast<const float*>(c.b)), ldb, c.stride_b, c.beta, C, stride(c.ldc, c.N),
                   c.stride_c);
    else if (c.bias != nullptr && c.bf16_operands)
      gemm_bf16_bias(c.trans_a, c.trans_b, c.M, c.N, c.K, at(static_cast<const bf16*>(c.a)), lda,
                     at(static_cast<const bf16*>(c.b)), ldb, at(c.bias), C, stride(c.ldc, c.N));
    else if (c.bias != nullptr)
      gemm_bias(c.trans_a, c.trans_b, c.M, c.N, c.K, at(static_cast<const float*>(c.a)), lda,
                at(static_cast<const float*>(c.b)), ldb, at(c.bias), C, stride(c.ldc, c.N));
    else if (c.bf16_operands)
      gemm_bf16(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, at(static_cast<const bf16*>(c.a)), lda,
                at(static_cast<const bf16*>(c.b)), ldb, c.beta, C, stride(c.ldc, c.N));
    else
      gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, at(static_cast<const float*>(c.a)), lda,
           at(static_cast<const float*>(c.b)), ldb, c.beta, C, stride(c.ldc, c.N));
  }
}

}  // namespace shardtrain::cpu
