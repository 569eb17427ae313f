// Per-thread TurboJPEG handles (turbojpeg_handle.h).
#include "data/codec/turbojpeg_handle.h"

#include "tandem/error.h"

namespace tandem::data::codec {

namespace {

// Owns one handle; thread_local instances are destroyed at thread exit.
struct OwnedHandle {
  tjhandle handle = nullptr;
  OwnedHandle() = default;
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() { reset(); }
  void reset() noexcept {
    if (handle) tjDestroy(handle);
    handle = nullptr;
  }
};

thread_local OwnedHandle decompressor;
thread_local OwnedHandle compressor;

tjhandle make_handle(OwnedHandle& owned, tjhandle (*init)(), const char* what) {
  if (!owned.handle) {
    owned.handle = init();
    TD_CHECK(owned.handle != nullptr, ErrorCode::out_of_memory, "jpeg", "cannot create a TurboJPEG {}: {}",
             what, tjGetErrorStr2(nullptr));
  }
  return owned.handle;
}

}  // namespace

tjhandle thread_jpeg_decompressor() { return make_handle(decompressor, &tjInitDecompress, "decompressor"); }
void discard_thread_jpeg_decompressor() noexcept { decompressor.reset(); }

tjhandle thread_jpeg_compressor() { return make_handle(compressor, &tjInitCompress, "compressor"); }
void discard_thread_jpeg_compressor() noexcept { compressor.reset(); }

}  // namespace tandem::data::codec
