#include "runtime/core/tensor.h"

#include "runtime/core/device_memory.h"
#include "runtime/core/error.h"

#include <cstring>

namespace shardtrain {

Storage::Storage(size_t bytes, Device device)
    : allocator_(&allocator_for(device)), data_(allocator_->allocate(bytes)), bytes_(bytes), device_(device) {}

Storage::Storage(size_t bytes, Allocator& host_allocator)
    : allocator_(&host_allocator), data_(allocator_->allocate(bytes)), bytes_(bytes), device_(Device::cpu()) {}

Storage::~Storage() { allocator_->deallocate(data_, bytes_); }

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(size_t(shape.numel()) * dtype_size(dtype), device);
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_zero();
  return t;
}

Tensor Tensor::empty_pinned(Shape shape, DType dtype) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(size_t(shape.numel()) * dtype_size(dtype), pinned_host_allocator());
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::view(int64_t offset, Shape shape) const {
  ST_CHECK(defined(), "view of an undefined tensor");
  ST_CHECK(offset >= 0 && offset + shape.numel() <= numel(),
           "view of {} elements at offset {} does not fit in a tensor of shape {}", shape.numel(), offset,
           shape_.str());
  Tensor t = *this;
  t.offset_bytes_ = offset_bytes_ + size_t(offset) * dtype_size(dtype_);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  ST_CHECK(shape.numel() == numel(), "cannot reshape {} into {}", shape_.str(), shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

void* Tensor::raw() const { return storage_ ? static_cast<char*>(storage_->data()) + offset_bytes_ : nullptr; }

float* Tensor::f32() const {
  ST_CHECK(dtype_ == DType::f32, "tensor of shape {} holds {}, not f32", shape_.str(), dtype_name(dtype_));
  return static_cast<float*>(raw());
}

bf16* Tensor::bf16_data() const {
  ST_CHECK(dtype_ == DType::bf16, "tensor of shape {} holds {}, not bf16", shape_.str(), dtype_name(dtype_));
  return static_cast<bf16*>(raw());
}

int32_t* Tensor::i32() const {
  ST_CHECK(dtype_ == DType::i32, "tensor of shape {} holds {}, not i32", shape_.str(), dtype_name(dtype_));
  return static_cast<int32_t*>(raw());
}

void Tensor::fill_zero() const {
  if (nbytes() == 0) return;
  if (!device().is_cpu()) return device_memory_ops().fill_zero(raw(), nbytes(), device());
  std::memset(raw(), 0, nbytes());
}

}  // namespace shardtrain
