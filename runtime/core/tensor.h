// Tensor: a shape, a dtype, a device and a view into reference-counted storage.
// A tensor either owns fresh storage (Tensor::empty/zeros) or is a view into
// another tensor's storage (view()), which is how every Block's parameters and
// gradients point into one flat buffer: bucketing and sharding then work on
// contiguous byte ranges, never parameter by parameter.
#pragma once

#include "runtime/core/allocator.h"
#include "runtime/core/device.h"
#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"

#include <cstddef>
#include <memory>
#include <span>

namespace shardtrain {

// One allocation, returned to its device's allocator when the last tensor
// referring to it goes away.
class Storage {
 public:
  Storage(size_t bytes, Device device);
  // Host memory from a given allocator (page-locked memory for copies to a GPU).
  Storage(size_t bytes, Allocator& host_allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Allocator* allocator_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(Shape shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(Shape shape, DType dtype = DType::f32, Device device = Device::cpu());
  // Host memory that a GPU copies from without staging (page-locked, from
  // pinned_host_allocator()); plain host memory where no GPU backend is up.
  static Tensor empty_pinned(Shape shape, DType dtype = DType::f32);

  // A view of `shape` starting `offset` elements into this tensor's storage
  // region; it must fit inside this tensor.
  Tensor view(int64_t offset, Shape shape) const;
  // The same elements with another shape of equal numel.
  Tensor reshape(Shape shape) const;

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  int64_t dim(int i) const { return shape_[i]; }

  void* raw() const;
  // Typed access; checks the dtype.
  float* f32() const;
  bf16* bf16_data() const;
  int32_t* i32() const;
  std::span<float> f32_span() const { return {f32(), size_t(numel())}; }

  void fill_zero() const;  // host or device memset of this view's bytes

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
};

}  // namespace shardtrain
