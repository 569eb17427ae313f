// Element types and the 16-bit float conversions used for mixed precision.
// Thread-safety: all functions are pure.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace tandem {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, u8 };

/// Size of one element in bytes.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

/// Lower-case name ("f32", "bf16", ...).
const char* dtype_name(DType t);
/// Name used by the safetensors format ("F32", "BF16", "I64", ...).
const char* dtype_safetensors_name(DType t);
/// Parses a safetensors dtype name; throws Error(format) for names tandem does not support.
DType dtype_from_safetensors_name(const std::string& name);

/// bfloat16 <-> float: round to nearest even; NaN stays NaN (Intel BF16 spec, PyTorch c10::BFloat16).
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// IEEE 754 binary16 <-> float, round to nearest even, with subnormals, inf and NaN.
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);

}  // namespace tandem
