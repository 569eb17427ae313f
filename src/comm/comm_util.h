// Internal helpers of the communicator implementations: buffer checks, fp32 accumulation of
// f32/f16/bf16 buffers, the timeout's wording.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/comm/communicator.h"
#include "tandem/error.h"

namespace tandem::comm {

constexpr const char* kOp = "comm";

/// Throws Error(invalid_argument) unless `t` is defined and contiguous (and, when `reduce`, of
/// dtype f32, f16 or bf16); `what` names the operation and argument ("all_reduce buf").
void check_buffer(const Tensor& t, const char* what, bool reduce);
/// Throws Error(invalid_argument) unless send.numel() == world_size * recv.numel() (`send_is_large`)
/// or recv.numel() == world_size * send.numel(), with the same dtype and device.
void check_blocks(const Tensor& send, const Tensor& recv, int world_size, bool send_is_large, const char* what);

/// acc[i] += element i of src (dtype f32, f16 or bf16), n elements.
void accumulate_f32(float* acc, const void* src, DType dtype, int64_t n);
/// dst[i] = acc[i] (or acc[i] / world_size for ReduceOp::mean) converted to `dtype`.
void store_from_f32(void* dst, const float* acc, DType dtype, int64_t n, ReduceOp op, int world_size);
/// In place: for ReduceOp::mean, divides each element of `buf` by world_size; no-op for sum.
void finish_mean(const Tensor& buf, ReduceOp op, int world_size);

/// The ranks other than `rank` of a world of `world_size`, as "rank 1" or "ranks 0, 2, 3".
std::string other_ranks(int rank, int world_size);
/// Throws Error(distributed): "[comm] rank R: OP got no answer within T s from WHO: ...".
[[noreturn]] void throw_timeout(int rank, const char* op, double seconds, const std::string& who);

}  // namespace tandem::comm
