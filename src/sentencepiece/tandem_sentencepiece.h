// The C interface of libtandem_sentencepiece.so, the module that alone links Debian's
// libsentencepiece and libsentencepiece_train. libsentencepiece carries its own copy of
// protobuf's symbols (google::protobuf::*, an older version than Debian's libprotobuf-lite);
// linked into the program beside libprotobuf-lite (src/metrics, TensorBoard event files) one
// copy's functions were called on the other's objects and event writing crashed. tandem loads
// this module with dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND) (src/data/tokens/
// sentencepiece_module.cpp): its symbols stay out of the program's global scope, and the
// references of the module and of libsentencepiece bind inside the module's own dependencies
// first. Only plain C types cross this interface.
//
// Every function that can fail returns 0 on success, else non-zero with *error set to a
// malloc'd NUL-terminated message (SentencePiece's status text) that the caller frees with
// tsp_free. Buffers returned through out-parameters are malloc'd by the module and freed with
// tsp_free. Thread-safety: tsp_train may run concurrently; a loaded model is immutable and its
// encode/decode may be called from any number of threads; tsp_unload once, after all uses.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The interface's version; the loader refuses a module whose version differs.
#define TSP_ABI_VERSION 1
int tsp_abi_version(void);

/// Trains a model on `text` (size bytes of UTF-8; each non-empty line is a sentence) with
/// SentencePiece's trainer flags `args` (e.g. "--model_type=bpe --vocab_size=4096"); the
/// serialised ModelProto comes back in *model (*model_size bytes).
int tsp_train(const char* text, size_t size, const char* args, char** model, size_t* model_size,
              char** error);

/// Loads a serialised model (a tokenizer.model file's bytes) into *handle.
int tsp_load(const char* model, size_t size, void** handle, char** error);
void tsp_unload(void* handle);
/// Pieces in the vocabulary (special ids included) and the end-of-text id.
int tsp_vocab_size(const void* handle);
int tsp_eos_id(const void* handle);

/// UTF-8 text to ids, into *ids (*count of them). by_line != 0 encodes each line on its own
/// (SentencePiece's sentences; the line breaks are not tokens), else the whole text as one.
int tsp_encode(const void* handle, const char* text, size_t size, int by_line, int32_t** ids,
               size_t* count, char** error);
/// Ids (each in [0, vocab size), checked by the caller) to UTF-8 text in *text (*size bytes,
/// NUL-terminated).
int tsp_decode(const void* handle, const int32_t* ids, size_t count, char** text, size_t* size,
               char** error);

/// Frees a buffer or message returned by this module.
void tsp_free(void* p);

#ifdef __cplusplus
}
#endif
