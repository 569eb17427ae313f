// The DLPack exchange structs (DLPack 0.8 ABI, the one torch.from_dlpack and
// numpy.from_dlpack read from a "dltensor" capsule), declared here because Debian ships no
// dlpack header. Layout and field meaning: the DLPack specification (dmlc/dlpack, dlpack.h).
#pragma once

#include <cstdint>

namespace tandem::py {

enum DLDeviceKind : int32_t { kDLCPU = 1 };
enum DLTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace tandem::py
