#include "comm/comm_util.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace tandem::comm {

void check_buffer(const Tensor& t, const char* what, bool reduce) {
  TD_CHECK_ARG(t.defined(), kOp, "{}: expected a tensor, got an undefined one", what);
  TD_CHECK_ARG(t.is_contiguous(), kOp, "{}: expected a contiguous tensor, got shape {} with other strides", what,
               shape_str(t.shape()));
  if (reduce) {
    const DType d = t.dtype();
    TD_CHECK_ARG(d == DType::f32 || d == DType::f16 || d == DType::bf16, kOp,
                 "{}: expected an f32, f16 or bf16 tensor to reduce, got {}", what, dtype_name(d));
  }
}

void check_blocks(const Tensor& send, const Tensor& recv, int world_size, bool send_is_large, const char* what) {
  const int64_t small = send_is_large ? recv.numel() : send.numel();
  const int64_t large = send_is_large ? send.numel() : recv.numel();
  TD_CHECK_ARG(large == small * world_size, kOp,
               "{}: expected the {} buffer to hold world_size ({}) x {} = {} elements, got {}", what,
               send_is_large ? "send" : "recv", world_size, small, small * world_size, large);
  TD_CHECK_ARG(send.dtype() == recv.dtype() && send.device() == recv.device(), kOp,
               "{}: send is {} on {} but recv {} on {}; expected the same dtype and device", what,
               dtype_name(send.dtype()), send.device().str(), dtype_name(recv.dtype()), recv.device().str());
}

void accumulate_f32(float* acc, const void* src, DType dtype, int64_t n) {
  if (dtype == DType::f32) {
    const float* s = static_cast<const float*>(src);
    for (int64_t i = 0; i < n; ++i) acc[i] += s[i];
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (dtype == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) acc[i] += bf16_to_float(s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] += f16_to_float(s[i]);
  }
}

void store_from_f32(void* dst, const float* acc, DType dtype, int64_t n, ReduceOp op, int world_size) {
  const float w = static_cast<float>(world_size);
  auto value = [&](int64_t i) { return op == ReduceOp::mean ? acc[i] / w : acc[i]; };
  if (dtype == DType::f32) {
    float* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = value(i);
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(dst);
  if (dtype == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(value(i));
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(value(i));
  }
}

void finish_mean(const Tensor& buf, ReduceOp op, int world_size) {
  if (op != ReduceOp::mean || world_size == 1) return;
  const int64_t n = buf.numel();
  if (buf.dtype() == DType::f32) {
    float* d = static_cast<float*>(buf.raw_data());
    const float w = static_cast<float>(world_size);
    for (int64_t i = 0; i < n; ++i) d[i] = d[i] / w;
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(buf.raw_data());
  const bool bf = buf.dtype() == DType::bf16;
  const float w = static_cast<float>(world_size);
  for (int64_t i = 0; i < n; ++i) {
    const float v = (bf ? bf16_to_float(d[i]) : f16_to_float(d[i])) / w;
    d[i] = bf ? float_to_bf16(v) : float_to_f16(v);
  }
}

std::string other_ranks(int rank, int world_size) {
  std::string list;
  int count = 0;
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
    ++count;
  }
  return (count == 1 ? "rank " : "ranks ") + list;
}

void throw_timeout(int rank, const char* op, double seconds, const std::string& who) {
  throw_error(ErrorCode::distributed, kOp,
              fmt::format("rank {}: {} got no answer within {:g} s (--dist-timeout) from {}: that rank died, hangs "
                          "or runs another command; expected every rank to join",
                          rank, op, seconds, who));
}

}  // namespace tandem::comm
