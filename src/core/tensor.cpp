#include "tandem/tensor.h"

#include <cstring>

namespace tandem {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

// Refuses products past 2^63 - 1 instead of letting them wrap (a wrapped count would size a
// storage far smaller than the shape). A zero dimension makes any shape empty.
int64_t shape_numel(const Shape& s) {
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    TD_CHECK_ARG(!__builtin_mul_overflow(n, d, &n), "tensor",
                 "shape {}: expected at most 2^63 - 1 elements", shape_str(s));
  return n;
}

static Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  // The outermost dimension never scales a stride; an inner product can pass 2^63 - 1 only
  // in an empty shape (shape_numel refuses it otherwise), whose strides are never used.
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    if (i > 0 && __builtin_mul_overflow(acc, shape[i], &acc)) acc = 0;
  }
  return st;
}

// Strides of `format` for `shape` (channels_last: 4-D only).
static Shape format_strides(const Shape& shape, MemoryFormat format) {
  if (format == MemoryFormat::contiguous) return contiguous_strides(shape);
  TD_CHECK_ARG(shape.size() == 4, "tensor", "channels_last needs a 4-D shape [N, C, H, W], found {}",
               shape_str(shape));
  const int64_t c = shape[1], h = shape[2], w = shape[3];
  return {h * w * c, 1, w * c, c};
}

// Whether `strides` equal `want` on every dimension of size > 1.
static bool same_strides(const Shape& shape, const Shape& strides, const Shape& want) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] > 1 && strides[i] != want[i]) return false;
  return true;
}

const char* memory_format_name(MemoryFormat f) {
  return f == MemoryFormat::channels_last ? "channels_last" : "contiguous";
}

Storage::Storage(size_t nbytes, Device device, Allocator* allocator)
    : nbytes_(nbytes), device_(device), allocator_(allocator) {
  data_ = allocator_->allocate(nbytes);
}

Storage::Storage(void* data, size_t nbytes, Device device)
    : data_(data), nbytes_(nbytes), device_(device) {}

Storage::~Storage() {
  if (allocator_) allocator_->deallocate(data_, nbytes_);
}

// Fresh device memory comes from the pool of the calling thread's current stream of the
// device (cuda; the default stream unless the thread made another current), whose blocks are
// reused in that stream's order alone: work queued there may still read or write the block.
// A copy into it on any other stream therefore waits for that stream first (device-side).
// (virt's pool is stream-less, but its work keeps every storage it uses alive until it ran.)
static void order_after_home_stream(Device device, const Stream& stream) {
  if (device.is_host()) return;
  Stream home = runtime_for(device).current_stream(device.index);
  if (home.impl() != stream.impl()) stream.wait(home.record());
}

void Storage::migrate(Device device, const Stream& stream) {
  if (device == device_) return;
  Allocator* target = device.is_host() ? &host_allocator() : &runtime_for(device).allocator(device.index);
  void* fresh = target->allocate(nbytes_);
  try {
    Runtime& rt = runtime_for(device.is_host() ? device_ : device);
    if (!pending_write_.query()) stream.wait(pending_write_);
    order_after_home_stream(device, stream);
    rt.copy_async(fresh, device, data_, device_, nbytes_, stream);
    stream.synchronize();
  } catch (...) {
    target->deallocate(fresh, nbytes_);
    throw;
  }
  if (allocator_) allocator_->deallocate(data_, nbytes_);
  data_ = fresh;
  device_ = device;
  allocator_ = target;
  pending_write_ = Event();
}

// Dimensions >= 0 whose element and byte counts fit in int64.
static void check_shape(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    TD_CHECK_ARG(d >= 0, "tensor", "negative dimension in shape {}", shape_str(shape));
  int64_t bytes = 0;
  TD_CHECK_ARG(
      !__builtin_mul_overflow(shape_numel(shape), static_cast<int64_t>(dtype_size(dtype)), &bytes),
      "tensor", "shape {} of {}: expected at most 2^63 - 1 bytes", shape_str(shape),
      dtype_name(dtype));
}

Tensor Tensor::empty_with(const Shape& shape, DType dtype, Allocator& allocator) {
  check_shape(shape, dtype);
  Tensor t;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype),
                                         allocator.device(), &allocator);
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Allocator& a = device.is_host() ? host_allocator() : runtime_for(device).allocator(device.index);
  return empty_with(shape, dtype, a);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  const Shape strides = format_strides(shape, format);
  Tensor t = empty(shape, dtype, device);
  t.strides_ = strides;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  TD_CHECK_ARG(device.is_host(), "zeros", "device {} is not host-accessible", device.str());
  Tensor t = empty(shape, dtype, device);
  if (t.nbytes()) std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = empty(shape, DType::f32, device);
  t.fill(value);
  return t;
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values) {
  TD_CHECK_ARG(shape_numel(shape) == static_cast<int64_t>(values.size()), "from_vector",
               "shape {} holds {} elements, got {} values", shape_str(shape), shape_numel(shape),
               values.size());
  Tensor t = empty(shape);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device) {
  check_shape(shape, dtype);
  Tensor t;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(data, static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype),
                                         device);
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  const Shape strides = format_strides(shape, format);
  Tensor t = from_blob(data, shape, dtype, device);
  t.strides_ = strides;
  return t;
}

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  if (d < 0) d += n;
  TD_CHECK_ARG(d >= 0 && d < n, "tensor", "dimension {} out of range for shape {}", d,
               shape_str(shape_));
  return shape_[static_cast<size_t>(d)];
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device{}; }

bool Tensor::is_contiguous() const { return same_strides(shape_, strides_, contiguous_strides(shape_)); }

bool Tensor::is_contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::contiguous) return is_contiguous();
  return dim() == 4 && same_strides(shape_, strides_, format_strides(shape_, format));
}

MemoryFormat Tensor::memory_format() const {
  return !is_contiguous() && is_contiguous(MemoryFormat::channels_last) ? MemoryFormat::channels_last
                                                                       : MemoryFormat::contiguous;
}

void Tensor::check_host_access(DType requested) const {
  TD_CHECK_ARG(defined(), "tensor", "access to an undefined tensor");
  const bool ok16 = requested == DType::bf16 && (dtype_ == DType::f16 || dtype_ == DType::bf16);
  TD_CHECK_ARG(requested == dtype_ || ok16, "tensor", "data<{}>() on a {} tensor",
               dtype_name(requested), dtype_name(dtype_));
  TD_CHECK_ARG(storage_->device().is_host(), "tensor",
               "host access to memory on {}: copy it to the host first", storage_->device().str());
  if (!storage_->pending_write().query()) {
    throw_error(ErrorCode::internal, "tensor",
                "host read of a tensor whose asynchronous copy has not completed: synchronize on "
                "its event first");
  }
}

void* Tensor::raw_data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

Tensor Tensor::view(const Shape& shape) const {
  TD_CHECK_ARG(is_contiguous(), "view", "tensor with shape {} is not contiguous", shape_str(shape_));
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      TD_CHECK_ARG(infer < 0, "view", "more than one -1 in {}", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      TD_CHECK_ARG(s[i] >= 0, "view", "negative dimension in {}", shape_str(shape));
      if (__builtin_mul_overflow(known, s[i], &known)) known = 0;  // too large: refused below
    }
  }
  if (infer >= 0) {
    TD_CHECK_ARG(known > 0 && numel() % known == 0, "view", "cannot view {} as {}", shape_str(shape_),
                 shape_str(shape));
    s[static_cast<size_t>(infer)] = numel() / known;
  }
  TD_CHECK_ARG(shape_numel(s) == numel(), "view", "cannot view {} ({} elements) as {}",
               shape_str(shape_), numel(), shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  t.strides_ = contiguous_strides(s);
  return t;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const int64_t n = size(d);
  if (d < 0) d += dim();
  TD_CHECK_ARG(start >= 0 && length >= 0 && start + length <= n, "narrow",
               "range [{}, {}) out of bounds for dimension {} of size {}", start, start + length, d, n);
  Tensor t = *this;
  t.shape_[static_cast<size_t>(d)] = length;
  t.offset_ += start * strides_[static_cast<size_t>(d)];
  return t;
}

Tensor Tensor::select(int64_t i) const {
  TD_CHECK_ARG(dim() >= 1, "select", "cannot select from a 0-d tensor");
  Tensor t = narrow(0, i, 1);
  t.shape_.erase(t.shape_.begin());
  t.strides_.erase(t.strides_.begin());
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device(), memory_format());
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  TD_CHECK_ARG(src.shape_ == shape_ && src.dtype_ == dtype_, "copy", "shape/dtype mismatch: {} {} <- {} {}",
               shape_str(shape_), dtype_name(dtype_), shape_str(src.shape_), dtype_name(src.dtype_));
  TD_CHECK_ARG(device().is_host() && src.device().is_host(), "copy",
               "copy_from is host-only; use to(device, stream) for {} -> {}", src.device().str(),
               device().str());
  src.check_host_access(src.dtype_ == DType::f16 ? DType::bf16 : src.dtype_);
  TD_CHECK_ARG(is_dense() && src.is_dense() && memory_format() == src.memory_format(), "copy",
               "copy between layouts not supported: {} {} <- {} {} (expected the same dense memory format)",
               shape_str(shape_), memory_format_name(memory_format()), shape_str(src.shape_),
               memory_format_name(src.memory_format()));
  if (nbytes()) std::memcpy(raw_data(), src.raw_data(), nbytes());
}

void Tensor::fill(double value) {
  TD_CHECK_ARG(device().is_host(), "fill", "device {} is not host-accessible", device().str());
  TD_CHECK_ARG(is_contiguous(), "fill", "non-contiguous fill not supported");
  const int64_t n = numel();
  switch (dtype_) {
    case DType::f32: {
      float* p = data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(value);
      break;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t v = dtype_ == DType::f16 ? float_to_f16(static_cast<float>(value))
                                        : float_to_bf16(static_cast<float>(value));
      uint16_t* p = data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      break;
    }
    case DType::i32: {
      int32_t* p = data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(value);
      break;
    }
    case DType::i64: {
      int64_t* p = data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(value);
      break;
    }
    case DType::u8: {
      uint8_t* p = data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(value);
      break;
    }
  }
}

double Tensor::item(int64_t i) const {
  TD_CHECK_ARG(i >= 0 && i < numel(), "item", "index {} out of range for {} elements", i, numel());
  // i is the row-major (logical) index; its memory offset follows the strides, so views and
  // channels_last tensors read the element a contiguous copy would hold at i.
  int64_t at = 0;
  for (size_t d = shape_.size(), rest = static_cast<size_t>(i); d-- > 0;) {
    const size_t extent = static_cast<size_t>(shape_[d]);
    at += static_cast<int64_t>(rest % extent) * strides_[d];
    rest /= extent;
  }
  switch (dtype_) {
    case DType::f32: return data<float>()[at];
    case DType::f16: return f16_to_float(data<uint16_t>()[at]);
    case DType::bf16: return bf16_to_float(data<uint16_t>()[at]);
    case DType::i32: return data<int32_t>()[at];
    case DType::i64: return static_cast<double>(data<int64_t>()[at]);
    case DType::u8: return data<uint8_t>()[at];
  }
  return 0;
}

Tensor Tensor::to(DType dtype) const {
  TD_CHECK_ARG(is_dense(), "to", "tensor {} is not dense (expected contiguous or channels_last)", shape_str(shape_));
  if (dtype == dtype_) return clone();
  Tensor out = empty(shape_, dtype, device(), memory_format());
  const int64_t n = numel();
  if (dtype_ == DType::f32 && (dtype == DType::f16 || dtype == DType::bf16)) {
    const float* s = data<float>();
    uint16_t* d = out.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) d[i] = dtype == DType::f16 ? float_to_f16(s[i]) : float_to_bf16(s[i]);
  } else if (dtype == DType::f32) {
    // Element by element in memory order (the same for both tensors), read as item() does.
    Tensor flat = *this;
    flat.shape_ = {n};
    flat.strides_ = {1};
    float* d = out.data<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(flat.item(i));
  } else {
    throw_error(ErrorCode::invalid_argument, "to",
                fmt::format("conversion {} -> {} not supported", dtype_name(dtype_), dtype_name(dtype)));
  }
  return out;
}

Tensor Tensor::to(Device dev, const Stream& stream) const {
  TD_CHECK_ARG(is_dense(), "to", "tensor {} is not dense (expected contiguous or channels_last)",
               shape_str(shape_));
  Tensor out = empty(shape_, dtype_, dev, memory_format());
  Runtime& rt = runtime_for(dev.is_host() ? device() : dev);
  // Ordered after an asynchronous write into the source (a copy or op still in flight).
  if (!storage_->pending_write().query()) stream.wait(storage_->pending_write());
  order_after_home_stream(dev, stream);
  rt.copy_async(out.raw_data(), dev, raw_data(), device(), nbytes(), stream);
  // Both storages stay alive until the copy ran, even if the caller drops them at once:
  // otherwise the copy would read or write memory already handed to someone else.
  stream.enqueue([src = storage_, dst = out.storage_] {});
  out.storage_->set_pending_write(stream.record());
  return out;
}

std::vector<float> Tensor::to_vector() const {
  TD_CHECK_ARG(dtype_ == DType::f32 && is_dense(), "to_vector",
               "needs a contiguous or channels_last f32 tensor, found {} {}", dtype_name(dtype_),
               shape_str(shape_));
  const float* p = data<float>();
  if (is_contiguous()) return std::vector<float>(p, p + numel());
  // channels_last: NHWC in memory, returned in [N, C, H, W] order.
  const int64_t n = shape_[0], c = shape_[1], hw = shape_[2] * shape_[3];
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < hw; ++s) out[static_cast<size_t>((i * c + k) * hw + s)] = p[(i * hw + s) * c + k];
  return out;
}

}  // namespace tandem
