// Text to token shards: a SentencePiece tokenizer (Kudo and Richardson 2018, Debian's
// libsentencepiece; BPE by default) trained on a corpus, and the corpus encoded with it into a
// train and a validation token shard (token_shard.h).
//
// tokenize_corpus(options) reads every corpus file (UTF-8 text), splits the concatenated text at
// the first line break after (1 - val_fraction) of its bytes (the validation text is the end
// of the corpus, never seen by the tokenizer's training), trains the tokenizer on the
// training text, and writes into out_dir:
//   tokenizer.model  the SentencePiece model (protobuf, readable by the Python package too)
//   train.tok        the training text's ids, with an end-of-text id between files
//   val.tok          the validation text's ids
// Each file is written atomically. The same corpus and options give the same files.
// Errors, each one line naming the file: a corpus file missing (Error(io)); a corpus that is
// empty, not UTF-8 (naming the byte offset) or too small for the vocabulary (Error(format) /
// Error(invalid_argument)); a vocab_size outside [256 + 4, 2^20] or a val_fraction outside
// (0, 0.5] (Error(invalid_argument)); SentencePiece's own failure (Error(format) with its text).
// Thread-safety: tokenize_corpus may run concurrently on distinct out_dirs; a Tokenizer is
// immutable after load and its methods may be called from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::data {

struct TokenizeOptions {
  std::vector<std::string> corpus;  // text files, read in this order
  std::string out_dir;              // created when missing
  int vocab_size = 4096;            // including the special ids (unk, bos, eos)
  double val_fraction = 0.1;        // share of the corpus' bytes held out for validation
  std::string model_type = "bpe";   // bpe or unigram (SentencePiece's --model_type)
  int num_threads = 2;              // SentencePiece's training threads
};

struct TokenizeResult {
  int64_t corpus_bytes = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int vocab_size = 0;
  std::string model_path, train_path, val_path;
  double seconds = 0;  // wall time of the whole call
};

TokenizeResult tokenize_corpus(const TokenizeOptions& options);

/// A trained SentencePiece model.
class Tokenizer {
 public:
  /// Loads `model_path` (tokenizer.model); Error(io) when missing, Error(format) when not a
  /// SentencePiece model.
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  int vocab_size() const;
  /// The id written between documents (SentencePiece's eos).
  int eos_id() const;
  /// UTF-8 text to ids; Error(invalid_argument) for text that is not UTF-8.
  std::vector<int> encode(const std::string& text) const;
  /// Ids to text; ids outside [0, vocab_size()) are Error(invalid_argument) naming the id.
  std::string decode(const std::vector<int>& ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The byte offset of the first invalid UTF-8 sequence in `text` (overlong forms, surrogates and
/// code points above U+10FFFF are invalid), or -1 when it is all valid.
int64_t first_invalid_utf8(const std::string& text);

}  // namespace tandem::data
