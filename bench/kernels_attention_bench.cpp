// Causal self-attention, forward + backward, at one GPT-2 small layer's
// shape (B = 1, H = 12 heads of 64) for T = 256 .. 4096: the materialized
// kernel (attention.h: probabilities [B, H, T, T] kept for the backward, plus
// a T x T scratch) against the tiled online-softmax one (flash_attention.h:
// one log-sum-exp per row, workspace growing as T). Each repetition is one
// forward and one backward, timed by hand; the table at the end puts the
// best repetition of each side by side with the bytes each keeps or needs
// beyond qkv, out and the gradients, which both share.
#include "kernels/cpu/attention.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/gemm.h"
#include "runtime/core/rng.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace shardtrain::cpu {
namespace {

constexpr int64_t kB = 1, kH = 12, kHs = 64, kC = kH * kHs;

std::vector<float> random_buffer(int64_t n, uint64_t key) {
  Rng rng(key);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

// Best seconds per T, and the bytes kept, for the summary table.
struct Best {
  double seconds = std::numeric_limits<double>::infinity();
  double bytes = 0.0;
};
std::map<int64_t, Best> materialized_best, tiled_best;

// Times one call of step() as the repetition's iteration.
template <class Step>
void time_step(benchmark::State& state, Best& best, double bytes, Step&& step) {
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    step();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    best.seconds = std::min(best.seconds, seconds);
    benchmark::ClobberMemory();
  }
  best.bytes = bytes;
  state.counters["kept_MiB"] = bytes / double(1 << 20);
}

void bm_materialized(benchmark::State& state, int64_t T) {
  const auto qkv = random_buffer(kB * T * 3 * kC, 1), dout = random_buffer(kB * T * kC, 2);
  std::vector<float> out(size_t(kB * T * kC)), dqkv(qkv.size());
  std::vector<float> att(size_t(kB * kH * T * T)), scratch(size_t(T * T));
  const double bytes = 4.0 * double(att.size() + scratch.size());
  time_step(state, materialized_best[T], bytes, [&] {
    attention_forward(out.data(), att.data(), qkv.data(), kB, T, kC, kH);
    attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), kB, T, kC, kH);
  });
}

void bm_tiled(benchmark::State& state, int64_t T) {
  const auto qkv = random_buffer(kB * T * 3 * kC, 1), dout = random_buffer(kB * T * kC, 2);
  std::vector<float> out(size_t(kB * T * kC)), dqkv(qkv.size());
  std::vector<float> lse(size_t(kB * kH * T)), scratch(size_t(flash_attention_scratch_floats(T, kHs)));
  const double bytes = 4.0 * double(lse.size() + scratch.size());
  time_step(state, tiled_best[T], bytes, [&] {
    flash_attention_forward(out.data(), lse.data(), qkv.data(), kB, T, kH, kH, kHs);
    flash_attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(), lse.data(), kB, T, kH,
                             kH, kHs);
  });
}

void register_all() {
  // Fewer repetitions where one takes seconds: the whole run stays under a
  // minute on two cores (29 s with the Haswell kernels, 51 s with SSE3 ones).
  const std::pair<int64_t, int> sizes[] = {{256, 20}, {512, 10}, {1024, 6}, {2048, 4}, {4096, 3}};
  for (const auto& [T, reps] : sizes) {
    for (const bool tiled : {false, true}) {
      const auto name = fmt::format("attention_fwd_bwd/{}/T{}", tiled ? "tiled" : "materialized", T);
      benchmark::RegisterBenchmark(name.c_str(), tiled ? bm_tiled : bm_materialized, T)
          ->Iterations(1)
          ->Repetitions(reps)
          ->ReportAggregatesOnly(true)
          ->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void print_summary() {
  if (materialized_best.empty() && tiled_best.empty()) return;
  // The table's speeds depend on OpenBLAS's kernel set: a CPU newer than the
  // library gets its generic SSE3 one unless OPENBLAS_CORETYPE says otherwise.
  fmt::print("\nB={} H={} hs={}, OpenBLAS core {}, forward + backward, best repetition;\n", kB, kH, kHs, blas_core());
  fmt::print("kept: bytes beyond qkv, out and the gradients (materialized: att + T*T scratch; tiled: lse + scratch)\n");
  fmt::print("{:>6} {:>17} {:>10} {:>8} {:>19} {:>14} {:>12}\n", "T", "materialized ms", "tiled ms", "speedup",
             "materialized MiB", "tiled MiB", "bytes ratio");
  for (const auto& [T, m] : materialized_best) {
    const auto it = tiled_best.find(T);
    if (it == tiled_best.end()) continue;
    const Best& t = it->second;
    fmt::print("{:>6} {:>17.1f} {:>10.1f} {:>7.2f}x {:>19.1f} {:>14.3f} {:>11.0f}x\n", T, m.seconds * 1e3,
               t.seconds * 1e3, m.seconds / t.seconds, m.bytes / double(1 << 20), t.bytes / double(1 << 20),
               m.bytes / t.bytes);
  }
}

}  // namespace
}  // namespace shardtrain::cpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  shardtrain::cpu::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  shardtrain::cpu::print_summary();
  return 0;
}
