// The CRC-32 the loaders compute over every sample they read
// (shard_format::sample_crc32, libdeflate's) against zlib's crc32_z, the
// same function of the bytes, at Fashion-MNIST's 784-byte samples and at
// 128 KiB; bytes per second over 64 MiB of samples.
#include "io/shard_format.h"

#include <benchmark/benchmark.h>
#include <zlib.h>

#include <cstdint>
#include <vector>

namespace shardtrain::io {
namespace {

constexpr size_t kBytes = size_t(64) << 20;

std::vector<uint8_t> data() {
  std::vector<uint8_t> v(kBytes);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t((i * 2654435761u) >> 13);
  return v;
}

void BM_SampleCrc32Libdeflate(benchmark::State& state) {
  const std::vector<uint8_t> v = data();
  const auto sample = size_t(state.range(0));
  for (auto _ : state) {
    uint32_t x = 0;
    for (size_t at = 0; at + sample <= v.size(); at += sample)
      x ^= shard_format::sample_crc32(v.data() + at, sample, int32_t(at));
    benchmark::DoNotOptimize(x);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes / sample * sample));
}

void BM_SampleCrc32Zlib(benchmark::State& state) {
  const std::vector<uint8_t> v = data();
  const auto sample = size_t(state.range(0));
  for (auto _ : state) {
    uint32_t x = 0;
    for (size_t at = 0; at + sample <= v.size(); at += sample) {
      const auto label = int32_t(at);
      const uLong crc = crc32_z(0L, v.data() + at, sample);
      x ^= uint32_t(crc32_z(crc, reinterpret_cast<const Bytef*>(&label), sizeof label));
    }
    benchmark::DoNotOptimize(x);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes / sample * sample));
}

BENCHMARK(BM_SampleCrc32Libdeflate)->Arg(784)->Arg(128 << 10)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SampleCrc32Zlib)->Arg(784)->Arg(128 << 10)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardtrain::io

BENCHMARK_MAIN();
