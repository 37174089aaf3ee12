// The core's peak f32 multiply-add rate, measured: independent FMA chains,
// enough of them to cover the FMA units' latency (12 chains of one vector
// register each), in the widest vectors the CPU has. This is "FMA units x
// vector width x 2 x clock" at the clock the core really runs (a VM's
// reported MHz is often the base clock, not the boost), the ceiling the
// products' GFLOP/s in `bench step` and kernels_gemm_bench are a fraction of.
// For bf16 the same on the CPU's bf16 units where it has them: AVX512-BF16's
// dot products (12 chains of VDPBF16PS, 64 FLOP each: 16 lanes x 2 pairs x
// 2), and AMX's tile products (TDPBF16PS into 4 accumulator tiles, all that
// 8 tiles leave beside two A and two B tiles: 16 x 16 x 32 x 2 = 16384 FLOP
// each), the ceilings of bf16 products.
#include <benchmark/benchmark.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
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

__attribute__((target("avx512f,avx512bf16"))) float dot_bf16_avx512(float seed) {
  __m512 acc[kChains];
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(1e-7f));
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + float(c));
  for (int64_t i = 0; i < kSteps; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

void bm_dot_bf16_peak(benchmark::State& state) {
  float seed = 1.0f;
  for (auto _ : state) {
    seed = dot_bf16_avx512(seed);
    benchmark::DoNotOptimize(seed);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(64.0 * kChains * double(kSteps) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// AMX-TILE and AMX-BF16 (CPUID leaf 7: EDX bits 24 and 22), and the
// kernel's permission for this process to use the tile data state.
bool amx_bf16_usable() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 22)) == 0) return false;
  constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
}

constexpr int64_t kTileSteps = 1 << 14;
constexpr double kTileFlops = 16.0 * 16 * 32 * 2;

__attribute__((target("amx-tile,amx-bf16"))) float tiles_bf16(const uint16_t* operand) {
  // Palette 1: tiles 0-3 are 16 x 16 f32 accumulators, 4-5 the A tiles and
  // 6-7 the B tiles, 16 rows of 64 bytes (32 bf16) each.
  alignas(64) uint8_t config[64] = {};
  config[0] = 1;
  for (int t = 0; t < 8; ++t) {
    config[16 + 2 * t] = 64;  // bytes per row
    config[48 + t] = 16;      // rows
  }
  _tile_loadconfig(config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand + 512, 64);
  _tile_loadd(6, operand + 1024, 64);
  _tile_loadd(7, operand + 1536, 64);
  for (int64_t i = 0; i < kTileSteps; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

void bm_amx_bf16_peak(benchmark::State& state) {
  alignas(64) static uint16_t operand[2048];
  for (int i = 0; i < 2048; ++i) operand[i] = uint16_t(0x3F80 + (i % 7));  // bf16 1.0 ... 1.05
  for (auto _ : state) benchmark::DoNotOptimize(tiles_bf16(operand));
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * kTileFlops * double(kTileSteps) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    benchmark::RegisterBenchmark("fma_peak/avx2_8_lanes", bm_fma_peak, 8);
  if (__builtin_cpu_supports("avx512f")) benchmark::RegisterBenchmark("fma_peak/avx512_16_lanes", bm_fma_peak, 16);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    benchmark::RegisterBenchmark("bf16_peak/avx512_bf16_dot", bm_dot_bf16_peak);
  if (amx_bf16_usable()) benchmark::RegisterBenchmark("bf16_peak/amx_tiles", bm_amx_bf16_peak);
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
