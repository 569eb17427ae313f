// Finds and loads libtandem_sentencepiece.so (src/sentencepiece/tandem_sentencepiece.h), the
// module that alone links SentencePiece and its copy of protobuf, with
// dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND), so that its protobuf symbols neither enter the
// program's global scope nor bind to libprotobuf-lite there.
// Search order: the file $TANDEM_SENTENCEPIECE_MODULE when set (only it); else beside the
// running program (/proc/self/exe's folder: the build folder), the program's ../lib (an
// installed bin/tandem), and the configured install folder (CMAKE_INSTALL_FULL_LIBDIR).
// Errors: Error(not_available, "[tokenize] ...") in one line naming every path searched and
// the loader's reason when no module loads, when its interface version differs, or in a build
// with AddressSanitizer (which refuses RTLD_DEEPBIND).
// Thread-safety: sentencepiece_module() may be called from any thread; the module is loaded
// once and never unloaded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::data::tokens {

/// The module's functions (see tandem_sentencepiece.h for each one's contract).
struct SentencePieceModule {
  int (*train)(const char*, size_t, const char*, char**, size_t*, char**);
  int (*load)(const char*, size_t, void**, char**);
  void (*unload)(void*);
  int (*vocab_size)(const void*);
  int (*eos_id)(const void*);
  int (*encode)(const void*, const char*, size_t, int, int32_t**, size_t*, char**);
  int (*decode)(const void*, const int32_t*, size_t, char**, size_t*, char**);
  void (*free)(void*);
};

/// The loaded module (loaded on the first call; a failed load is retried on the next call).
const SentencePieceModule& sentencepiece_module();

}  // namespace tandem::data::tokens
