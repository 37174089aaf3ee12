// Deterministic random numbers, identical on every platform and compiler (the
// standard library's distributions are not). Initialization, shuffling and
// dropout draw from streams keyed by (seed, purpose, index), so the numbers a
// parameter or an epoch gets do not depend on what was drawn before it.
#pragma once

#include <cmath>
#include <cstdint>

namespace shardtrain {

// SplitMix64 finalizer: a bijective 64-bit mix, good for deriving stream keys.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr uint64_t stream_key(uint64_t seed, uint64_t purpose, uint64_t index) {
  return mix64(mix64(mix64(seed) ^ purpose) ^ index);
}

// xoshiro256** seeded from one 64-bit key.
class Rng {
 public:
  explicit Rng(uint64_t key) {
    for (uint64_t& s : s_) key = s = mix64(key);
  }

  uint64_t next_u64() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 random bits (exactly representable in f32).
  float uniform() { return float(next_u64() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

  // Uniform integer in [0, n), unbiased (Lemire's method with rejection).
  uint64_t below(uint64_t n) {
    __extension__ using u128 = unsigned __int128;  // a GCC/Clang extension, hence the marker
    u128 m = u128(next_u64()) * n;
    auto low = uint64_t(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = u128(next_u64()) * n;
        low = uint64_t(m);
      }
    }
    return uint64_t(m >> 64);
  }

  // Standard normal by Box-Muller in double precision, rounded to f32.
  float normal() {
    double u1 = (double(next_u64() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    double u2 = double(next_u64() >> 11) * 0x1.0p-53;
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace shardtrain
