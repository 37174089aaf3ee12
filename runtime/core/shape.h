// A tensor shape: up to kMaxDims extents, stored inline (no heap allocation).
#pragma once

#include "runtime/core/error.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace shardtrain {

class Shape {
 public:
  static constexpr int kMaxDims = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    ST_CHECK(dims.size() <= size_t(kMaxDims), "a shape has at most {} dimensions", kMaxDims);
    for (int64_t d : dims) push_back(d);
  }

  void push_back(int64_t d) {
    ST_CHECK(ndim_ < kMaxDims, "a shape has at most {} dimensions", kMaxDims);
    ST_CHECK(d >= 0, "negative extent {} in a shape", d);
    dims_[size_t(ndim_++)] = d;
  }

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[size_t(i < 0 ? ndim_ + i : i)]; }
  int64_t& operator[](int i) { return dims_[size_t(i < 0 ? ndim_ + i : i)]; }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[size_t(i)];
    return n;
  }
  // Product of all extents but the last: the "rows" of a row-major matrix view.
  int64_t rows() const { return ndim_ == 0 ? 1 : numel() / dims_[size_t(ndim_ - 1)]; }
  int64_t cols() const { return ndim_ == 0 ? 1 : dims_[size_t(ndim_ - 1)]; }

  // The same shape with the first extent replaced (the batch dimension).
  Shape with_batch(int64_t batch) const {
    Shape s = *this;
    s.dims_[0] = batch;
    return s;
  }

  bool operator==(const Shape& o) const {
    if (ndim_ != o.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
      if (dims_[size_t(i)] != o.dims_[size_t(i)]) return false;
    return true;
  }

  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < ndim_; ++i) s += (i ? ", " : "") + std::to_string(dims_[size_t(i)]);
    return s + "]";
  }

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

// [batch, sample...]: a batch of samples of the given shape.
inline Shape batched(int64_t batch, const Shape& sample) {
  Shape s{batch};
  for (int i = 0; i < sample.ndim(); ++i) s.push_back(sample[i]);
  return s;
}

}  // namespace shardtrain
