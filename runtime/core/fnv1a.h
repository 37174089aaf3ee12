// FNV-1a, 32 bits: a hash of bytes that is the same on every rank, build and
// run (std::hash promises neither), for checking that ranks agree (the
// model's layout) and for naming what they share (a topology's tuning file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shardtrain {

class Fnv1a {
 public:
  void add(const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ static_cast<const uint8_t*>(data)[i]) * 16777619u;
  }
  // The text and a terminator, so that ("ab", "c") and ("a", "bc") differ.
  void add_text(std::string_view text) {
    add(text.data(), text.size());
    const uint8_t end = 0xff;
    add(&end, 1);
  }
  uint32_t value() const { return h_; }

 private:
  uint32_t h_ = 2166136261u;
};

}  // namespace shardtrain
