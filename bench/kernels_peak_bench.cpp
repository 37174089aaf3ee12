// The core's peak f32 multiply-add rate, measured: independent FMA chains,
// enough of them to cover the FMA units' latency (12 chains of one vector
// register each), in the widest vectors the CPU has. This is "FMA units x
// vector width x 2 x clock" at the clock the core really runs (a VM's
// reported MHz is often the base clock, not the boost), the ceiling the
// products' GFLOP/s in `bench step` and kernels_gemm_bench are a fraction of.
#include <benchmark/benchmark.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <cstdint>

namespace {

constexpr int kChains = 12;
constexpr int64_t kSteps = 1 << 16;

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) float fma_avx2(float seed) {
  __m256 acc[kChains];
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(seed + float(c));
  for (int64_t i = 0; i < kSteps; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return _mm256_cvtss_f32(sum);
}

__attribute__((target("avx512f"))) float fma_avx512(float seed) {
  __m512 acc[kChains];
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + float(c));
  for (int64_t i = 0; i < kSteps; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

void bm_fma_peak(benchmark::State& state, int lanes) {
  float seed = 1.0f;
  for (auto _ : state) {
    seed = lanes == 16 ? fma_avx512(seed) : fma_avx2(seed);
    benchmark::DoNotOptimize(seed);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * lanes * kChains * double(kSteps) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

void register_all() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    benchmark::RegisterBenchmark("fma_peak/avx2_8_lanes", bm_fma_peak, 8);
  if (__builtin_cpu_supports("avx512f")) benchmark::RegisterBenchmark("fma_peak/avx512_16_lanes", bm_fma_peak, 16);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
