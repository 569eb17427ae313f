// Internal to src/data/codec: one TurboJPEG decompressor and one compressor per thread,
// created on first use and destroyed when the thread exits. After a failed call a handle is
// discarded and the next call makes a new one: TurboJPEG 2.1.5 leaves a handle whose header
// read failed in a state where the next tjDecompressHeader3 returns success without setting
// its outputs.
#pragma once

#include <turbojpeg.h>

namespace tandem::data::codec {

/// This thread's decompressor. Throws Error(out_of_memory) when TurboJPEG cannot create one.
tjhandle thread_jpeg_decompressor();
/// Destroys this thread's decompressor (after copying any message you need from it).
void discard_thread_jpeg_decompressor() noexcept;
/// This thread's compressor. Throws Error(out_of_memory) when TurboJPEG cannot create one.
tjhandle thread_jpeg_compressor();
/// Destroys this thread's compressor.
void discard_thread_jpeg_compressor() noexcept;

}  // namespace tandem::data::codec
