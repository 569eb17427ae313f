// The field functions of tandem/data/field.h: lookups, sizes, token counts, class checks.
#include "tandem/data/field.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tandem/error.h"

namespace tandem::data {

static bool is_integer(DType t) { return t == DType::i32 || t == DType::i64 || t == DType::u8; }

const char* role_name(FieldRole role) { return role == FieldRole::input ? "input" : "target"; }

int find_field(const std::vector<Field>& fields, FieldRole role) {
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].role == role) return static_cast<int>(i);
  return -1;
}

int find_field(const std::vector<Field>& fields, std::string_view name) {
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == name) return static_cast<int>(i);
  return -1;
}

size_t sample_bytes(const std::vector<Field>& fields) {
  size_t n = 0;
  for (const Field& f : fields) n += f.bytes();
  return n;
}

int64_t tokens_per_sample(const std::vector<Field>& fields) {
  int64_t n = 0;
  for (const Field& f : fields)
    if (f.role == FieldRole::input && is_integer(f.dtype)) n += f.numel();
  return n;
}

bool image_input(const std::vector<Field>& fields) {
  const int i = find_field(fields, FieldRole::input);
  return i >= 0 && fields[static_cast<size_t>(i)].shape.size() == 3 && !is_integer(fields[static_cast<size_t>(i)].dtype);
}

void check_classes(const std::vector<Field>& fields, const std::byte* const* sample, const char* op) {
  for (size_t f = 0; f < fields.size(); ++f) {
    const Field& fd = fields[f];
    if (fd.classes <= 0) continue;
    const int64_t n = fd.numel();
    for (int64_t e = 0; e < n; ++e) {
      int64_t v = 0;
      if (fd.dtype == DType::i64) {
        std::memcpy(&v, sample[f] + e * 8, 8);
      } else if (fd.dtype == DType::i32) {
        int32_t w = 0;
        std::memcpy(&w, sample[f] + e * 4, 4);
        v = w;
      } else if (fd.dtype == DType::u8) {
        v = static_cast<int64_t>(std::to_integer<uint8_t>(sample[f][e]));
      } else {
        break;  // floating point: nothing to check
      }
      if (v >= 0 && v < fd.classes) continue;
      // "label 7", "target 50257": the field's name in the singular.
      const std::string what = fd.name.ends_with('s') ? fd.name.substr(0, fd.name.size() - 1) : fd.name;
      throw_error(ErrorCode::format, op,
                  fmt::format("{} {} is outside the dataset's {} classes: expected [0, {})", what, v, fd.classes,
                              fd.classes));
    }
  }
}

std::string describe_fields(const std::vector<Field>& fields) {
  std::string out;
  for (const Field& f : fields) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {} [{}] {}", f.name, dtype_name(f.dtype), fmt::join(f.shape, ", "),
                       role_name(f.role));
    if (f.classes > 0) out += fmt::format(" ({} classes)", f.classes);
  }
  return out;
}

}  // namespace tandem::data
