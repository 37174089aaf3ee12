#include "kernels/cpu/gemm_replay.h"

#include "runtime/core/rng.h"

#include <algorithm>

namespace shardtrain::cpu {
namespace {

// A call made up rather than recorded has no strides: dense.
int64_t stride(int64_t recorded, int64_t cols) { return recorded > 0 ? recorded : cols; }

}  // namespace

std::array<GemmReplay::Operand, 3> GemmReplay::operands(const GemmCall& c) {
  auto operand = [](const float* address, int64_t rows, int64_t cols, int64_t ld) {
    return Operand{address, rows == 0 || cols == 0 ? 0 : (rows - 1) * stride(ld, cols) + cols};
  };
  return {operand(c.a, c.trans_a ? c.K : c.M, c.trans_a ? c.M : c.K, c.lda),
          operand(c.b, c.trans_b ? c.N : c.K, c.trans_b ? c.K : c.N, c.ldb), operand(c.c, c.M, c.N, c.ldc)};
}

GemmReplay::GemmReplay(const std::vector<GemmCall>& calls) : calls_(calls) {
  std::map<uintptr_t, uintptr_t> extents;  // start -> end, in bytes of the step's memory
  for (const GemmCall& c : calls_)
    for (const Operand& o : operands(c))
      if (o.floats > 0) {
        uintptr_t& end = extents[uintptr_t(o.address)];
        end = std::max(end, uintptr_t(o.address) + uintptr_t(o.floats) * sizeof(float));
      }
  for (auto [start, end] : extents) {  // in order of address: the overlapping joined
    if (!stretches_.empty() && start < stretches_.rbegin()->second.end) {
      Stretch& last = stretches_.rbegin()->second;
      last.end = std::max(last.end, end);
    } else {
      stretches_[start].end = end;
    }
  }
  Rng rng(stream_key(7, uint64_t(calls_.size()), uint64_t(stretches_.size())));
  for (auto& [start, stretch] : stretches_) {
    // 64-byte aligned, as the runtime's allocator aligns a tensor.
    stretch.memory.resize((stretch.end - start) / sizeof(float) + 16);
    stretch.base = stretch.memory.data() + (64 - uintptr_t(stretch.memory.data()) % 64) % 64 / sizeof(float);
    for (float& x : stretch.memory) x = rng.uniform(-1, 1);
  }
}

int64_t GemmReplay::bytes() const {
  int64_t total = 0;
  for (const auto& [start, stretch] : stretches_) total += int64_t(stretch.end - start);
  return total;
}

float* GemmReplay::at(const float* address) {
  auto it = stretches_.upper_bound(uintptr_t(address));
  if (it == stretches_.begin()) return nullptr;  // an empty operand: never read
  --it;
  return it->second.base + (uintptr_t(address) - it->first) / sizeof(float);
}

void GemmReplay::run() {
  for (const GemmCall& c : calls_)
    gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, at(c.a), stride(c.lda, c.trans_a ? c.M : c.K), at(c.b),
         stride(c.ldb, c.trans_b ? c.K : c.N), c.beta, at(c.c), stride(c.ldc, c.N));
}

}  // namespace shardtrain::cpu
