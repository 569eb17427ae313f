// The dtype query: op names, supports() and require() over the backend registry.
#include <cstring>

#include "tandem/backend.h"
#include "tandem/stream.h"

namespace tandem::ops {

const char* op_name(Op op) {
  switch (op) {
#define TANDEM_OP_NAME_(name, ret) \
  case Op::name:                   \
    return #name;
    TANDEM_OPS(TANDEM_OP_NAME_)
#undef TANDEM_OP_NAME_
  }
  return "?";
}

namespace {

bool known_op(Op op) {
  return static_cast<int>(op) < kOpCount;
}
bool known_dtype(DType t) {
  return std::strcmp(dtype_name(t), "?") != 0;
}
bool known_kind(DeviceKind k) {
  return std::strcmp(device_kind_name(k), "?") != 0;
}

// The backend of an existing device: the kind's runtime is created as a first tensor would
// (its backend registers with it) and checks the index; null when either is missing (built
// without CUDA, no CUDA device, an index past the device count).
Backend* existing_backend(Device device) {
  if (!known_kind(device.kind) || device.index < 0) return nullptr;
  try {
    (void)runtime_for(device);
  } catch (...) {
    return nullptr;
  }
  return find_backend(device.kind);
}

}  // namespace

bool supports(Op op, DType dtype, Device device) {
  if (!known_op(op) || !known_dtype(dtype)) return false;
  Backend* b = existing_backend(device);
  if (!b) return false;
  try {
    return b->supports(op, dtype);
  } catch (...) {
    return false;  // a probe that failed to run (e.g. out of memory) answers no
  }
}

void throw_unsupported(Op op, DType dtype, Device device) {
  const std::string name = known_op(op) ? op_name(op) : fmt::format("op {}", static_cast<int>(op));
  throw_error(ErrorCode::not_available, name,
              fmt::format("{} is not supported on {}", dtype_name(dtype), device.str()));
}

void require(Op op, DType dtype, Device device) {
  if (!supports(op, dtype, device)) throw_unsupported(op, dtype, device);
}

std::string compute_note(DType dtype, Device device) {
  Backend* b = existing_backend(device);
  return b ? b->compute_note(dtype) : std::string();
}

}  // namespace tandem::ops
