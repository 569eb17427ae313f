// Tensor: an n-dimensional view (64-bit shape and strides, in elements) of shared storage
// on one device. Tensors are cheap handles: copying one shares its storage. Views
// (view, narrow, select) share storage too; clone() copies.
// Shapes are written outermost first, e.g. images [N, C, H, W].
// Thread-safety: a Tensor handle may be copied across threads; concurrent writes to the
// same elements are the caller's to order.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tandem/allocator.h"
#include "tandem/device.h"
#include "tandem/dtype.h"
#include "tandem/error.h"
#include "tandem/stream.h"

namespace tandem {

using Shape = std::vector<int64_t>;

/// The order of a 4-D tensor's [N, C, H, W] elements in memory, as PyTorch's
/// torch.contiguous_format / torch.channels_last: `contiguous` is row-major NCHW (strides
/// [C*H*W, H*W, W, 1]); `channels_last` stores NHWC (strides [H*W*C, 1, W*C, C]) while the
/// shape stays [N, C, H, W]. oneDNN's convolutions, batch norm and pooling run on
/// channels_last without reordering (the cpu backend's preferred activation layout; see
/// ops::preferred_memory_format). Where C == 1 or H == W == 1 the two orders coincide and a
/// tensor is both.
enum class MemoryFormat { contiguous, channels_last };
const char* memory_format_name(MemoryFormat f);  // "contiguous", "channels_last"

std::string shape_str(const Shape& s);  // "[128, 1, 28, 28]"
/// Product of the dimensions; 1 for [], 0 when a dimension is 0. Throws
/// Error(invalid_argument, "[tensor] shape [..]: expected at most 2^63 - 1 elements") when the
/// product overflows int64 (tensors are refused at creation for that, and for byte counts that
/// overflow).
int64_t shape_numel(const Shape& s);

/// A block of memory on one device. Owns it unless constructed from an external pointer.
/// A storage can carry a pending-write event (an asynchronous copy into it not yet known
/// to be complete): host access through Tensor::data() then throws instead of reading
/// stale bytes. See Tensor::data().
class Storage {
 public:
  Storage(size_t nbytes, Device device, Allocator* allocator);
  /// Wraps memory owned elsewhere (not freed here).
  Storage(void* data, size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  /// Moves the bytes to `device` in place: allocates there (host_allocator() for host
  /// devices, the device runtime's allocator otherwise), copies on `stream` (after any pending
  /// write, and after the target's default stream when `stream` is another one), blocks the host until the copy ran, then frees the old block. Every Tensor
  /// sharing this storage follows (their raw_data() and device() change), which is how
  /// nn::Module::to keeps parameter identity. No-op when already on `device`.
  /// The caller must ensure no other asynchronous work still uses the old block (e.g.
  /// synchronize the device's streams first). Throws Error(out_of_memory) when the target
  /// cannot allocate (the storage is then unchanged) and the copy's errors.
  /// Thread-safety: not safe against concurrent use of the storage from other threads.
  void migrate(Device device, const Stream& stream);

  /// Marks the storage as being written by asynchronous work that completes with `e`.
  void set_pending_write(Event e) { pending_write_ = std::move(e); }
  const Event& pending_write() const { return pending_write_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  Event pending_write_;
};

class Tensor {
 public:
  Tensor() = default;

  /// Uninitialised tensor. Throws Error(out_of_memory) when allocation fails,
  /// Error(invalid_argument) for negative dimensions.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = {});
  /// Uninitialised tensor laid out in `format`; channels_last needs a 4-D shape (throws
  /// Error(invalid_argument) otherwise).
  static Tensor empty(const Shape& shape, DType dtype, Device device, MemoryFormat format);
  /// Allocates from a given allocator (e.g. a pinned pool).
  static Tensor empty_with(const Shape& shape, DType dtype, Allocator& allocator);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = {});
  static Tensor full(const Shape& shape, float value, Device device = {});
  /// A host f32 tensor holding `values` with `shape` (numel must match).
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values);
  /// Wraps external memory (not owned).
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device = {});
  /// Wraps external memory (not owned) holding a tensor of `shape` laid out in `format`.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device, MemoryFormat format);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  /// Size of dimension d; negative d counts from the end. Throws on out-of-range d.
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const;
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  int64_t offset() const { return offset_; }
  /// Row-major with no gaps. Strides of size-1 dimensions are ignored (they never address
  /// memory), as in PyTorch.
  bool is_contiguous() const;
  /// Laid out densely in `format` (strides of size-1 dimensions ignored).
  bool is_contiguous(MemoryFormat format) const;
  /// channels_last when the tensor is dense channels_last and not also contiguous; contiguous
  /// otherwise (including tensors that are neither: check is_dense()).
  MemoryFormat memory_format() const;
  /// Dense in one of the two formats: its numel() elements fill nbytes() bytes from raw_data(),
  /// so element-wise work may treat it as a flat array.
  bool is_dense() const { return is_contiguous() || is_contiguous(MemoryFormat::channels_last); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  /// Typed host pointer to the first element. Throws Error(invalid_argument) when T does not
  /// match dtype() or the tensor is not on a host device, and Error(internal) when an
  /// asynchronous write into the storage has not completed (wait on its event first).
  template <typename T>
  T* data() const;
  /// Untyped pointer in the device's address space, for backends; no checks.
  void* raw_data() const;

  /// Same storage, new shape; one dimension may be -1. Requires a contiguous tensor.
  Tensor view(const Shape& shape) const;
  /// Elements [start, start+length) along dim d, sharing storage.
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  /// Removes dimension 0 by taking index i.
  Tensor select(int64_t i) const;
  /// A copy on the same device in the same memory format (dense host tensors only).
  Tensor clone() const;
  /// Copies src into this tensor (same shape, dtype and dense memory format, host devices).
  /// Synchronous. Throws Error(invalid_argument) on a mismatch.
  void copy_from(const Tensor& src);
  /// Sets every element to value (f32/f16/bf16/i32/i64/u8 host tensors).
  void fill(double value);
  /// Converts to another dtype (host, dense; the memory format is kept). f32 <-> f16/bf16
  /// rounds to nearest even.
  Tensor to(DType dtype) const;
  /// Copies to another device, ordered on `stream` (the destination device's or source's).
  /// The copy keeps the source's memory format; the source must be dense.
  /// The result's storage carries a pending-write event until the copy completed. Both
  /// storages are kept alive until the copy ran (dropping either handle at once is safe).
  /// When the source itself has a pending write, `stream` waits for it first (device-side).
  /// Any stream may be given: the destination's memory comes from the pool of its device's
  /// default stream, so a copy to a device on another stream also waits (device-side) for
  /// the work queued on that default stream, which may still use the block.
  Tensor to(Device device, const Stream& stream) const;
  /// Reads element i (row-major logical index, whatever the strides) of a host tensor as
  /// double (for tests and small reads).
  double item(int64_t i = 0) const;
  /// Copies a host f32 tensor into a vector in logical (row-major [N, C, H, W]) order; a
  /// channels_last tensor is read in that order too. Other layouts throw.
  std::vector<float> to_vector() const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;  // in elements
  DType dtype_ = DType::f32;

  void check_host_access(DType requested) const;
};

template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
// f16 and bf16 are read as uint16_t.
template <> constexpr DType dtype_of<uint16_t>() { return DType::bf16; }

template <typename T>
T* Tensor::data() const {
  check_host_access(dtype_of<T>());
  return reinterpret_cast<T*>(static_cast<char*>(storage_->data()) + offset_ * sizeof(T));
}

}  // namespace tandem
