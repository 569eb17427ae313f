// SentencePiece training and encoding into token shards (tandem/data/tokenizer.h).
#include "tandem/data/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/io/file_read.h"
#include "data/tokens/sentencepiece_module.h"
#include "tandem/atomic_file.h"
#include "tandem/data/token_shard.h"
#include "tandem/error.h"

namespace tandem::data {
namespace {

constexpr const char* kOp = "tokenize";

// A message or buffer the module allocated, freed by it.
struct ModuleFree {
  void operator()(void* p) const { tokens::sentencepiece_module().free(p); }
};
template <class T>
using ModulePtr = std::unique_ptr<T, ModuleFree>;

// Throws Error(code) with the module's message (*error, set by the call that returned `rc`)
// when `rc` is a failure. `error` is read here, after the call: a char* argument could be
// evaluated before the call that sets it.
void check(int rc, char** error, ErrorCode code, std::string_view what) {
  const ModulePtr<char> message(*error);
  const std::string text = message ? message.get() : "(no message)";
  // SentencePiece's advice names its own flags; say which of tandem's applies.
  const char* hint = text.find("required_chars") != std::string::npos
                         ? " (in tandem: expected a larger --vocab-size; every character of the corpus is kept)"
                         : "";
  TD_CHECK(rc == 0, code, kOp, "{}: {}{}", what, text, hint);
}

// A loaded model, unloaded by the module.
struct Model {
  void* handle = nullptr;
  explicit Model(const std::string& bytes, std::string_view what) {
    char* error = nullptr;
    check(tokens::sentencepiece_module().load(bytes.data(), bytes.size(), &handle, &error), &error,
          ErrorCode::format, what);
  }
  ~Model() {
    if (handle) tokens::sentencepiece_module().unload(handle);
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
};

// Ids of `text` (by_line: each line a sentence, the line breaks not tokens) appended to `out`.
template <class Id>
void encode_into(const void* handle, std::string_view text, bool by_line, std::vector<Id>& out) {
  int32_t* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  check(tokens::sentencepiece_module().encode(handle, text.data(), text.size(), by_line ? 1 : 0,
                                              &ids, &n, &error),
        &error, ErrorCode::format, "SentencePiece could not encode");
  const ModulePtr<int32_t> keep(ids);
  out.insert(out.end(), ids, ids + n);
}

}  // namespace

int64_t first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return static_cast<int64_t>(i);
    if (i + static_cast<size_t>(len) > n) return static_cast<int64_t>(i);
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return static_cast<int64_t>(i);
    i += static_cast<size_t>(len);
  }
  return -1;
}

TokenizeResult tokenize_corpus(const TokenizeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  TD_CHECK_ARG(!o.corpus.empty(), kOp, "expected at least one corpus file (--corpus)");
  TD_CHECK_ARG(o.vocab_size >= 260 && o.vocab_size <= (1 << 20), kOp,
               "--vocab-size must be in [260, 1048576], got {}", o.vocab_size);
  TD_CHECK_ARG(o.val_fraction > 0 && o.val_fraction <= 0.5, kOp,
               "--val-fraction must be in (0, 0.5], got {}", o.val_fraction);
  TD_CHECK_ARG(o.model_type == "bpe" || o.model_type == "unigram", kOp,
               "--model-type must be bpe or unigram, got '{}'", o.model_type);
  TD_CHECK_ARG(!o.out_dir.empty(), kOp, "expected an output folder (--out)");
  TD_CHECK_ARG(o.num_threads >= 1 && o.num_threads <= 1024, kOp, "--threads must be in [1, 1024], got {}",
               o.num_threads);
  std::string text;
  std::vector<uint8_t> bytes;
  for (const std::string& path : o.corpus) {
    io::read_file_into(path, kOp, bytes);
    std::string part(bytes.begin(), bytes.end());
    const int64_t bad = first_invalid_utf8(part);
    TD_CHECK(bad < 0, ErrorCode::format, kOp,
             "{}: not UTF-8 text: invalid byte 0x{:02x} at offset {}", path,
             bad < 0 ? 0 : static_cast<unsigned char>(part[static_cast<size_t>(bad)]), bad);
    if (!part.empty() && part.back() != '\n') part += '\n';
    text += part;
  }
  TD_CHECK(text.find_first_not_of(" \t\r\n") != std::string::npos, ErrorCode::format, kOp,
           "{}: the corpus is empty (expected UTF-8 text)", fmt::join(o.corpus, ", "));
  size_t split = text.find(
      '\n', static_cast<size_t>(static_cast<double>(text.size()) * (1.0 - o.val_fraction)));
  split = split == std::string::npos ? text.size() : split + 1;
  const std::string train_text = text.substr(0, split), val_text = text.substr(split);
  TD_CHECK(!val_text.empty() && !train_text.empty(), ErrorCode::format, kOp,
           "{}: the corpus is too short to hold out {} of it for validation (it has {} lines)",
           fmt::join(o.corpus, ", "), o.val_fraction, std::count(text.begin(), text.end(), '\n'));

  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  TD_CHECK(!ec, ErrorCode::io, kOp, "{}: cannot create the output folder: {}", o.out_dir,
           ec.message());
  const tokens::SentencePieceModule& spm = tokens::sentencepiece_module();
  const std::string args = fmt::format(
      "--model_type={} --vocab_size={} --character_coverage=1.0 --byte_fallback=true "
      "--num_threads={} "
      "--max_sentence_length=16384 --input_sentence_size=0 --shuffle_input_sentence=false "
      "--unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --minloglevel=2",
      o.model_type, o.vocab_size, std::max(1, o.num_threads));
  char* model_bytes = nullptr;
  size_t model_size = 0;
  char* error = nullptr;
  check(spm.train(train_text.data(), train_text.size(), args.c_str(), &model_bytes, &model_size,
                  &error),
        &error, ErrorCode::format,
        fmt::format("SentencePiece could not train a {}-token {} tokenizer on {}", o.vocab_size,
                    o.model_type, fmt::join(o.corpus, ", ")));
  const std::string model(model_bytes, model_size);
  spm.free(model_bytes);
  const Model sp(model, "the trained model does not load");
  TokenizeResult r;
  r.corpus_bytes = static_cast<int64_t>(text.size());
  r.vocab_size = spm.vocab_size(sp.handle);
  r.model_path = o.out_dir + "/tokenizer.model";
  r.train_path = o.out_dir + "/train.tok";
  r.val_path = o.out_dir + "/val.tok";
  std::vector<uint32_t> train_ids, val_ids;
  const auto eos = static_cast<uint32_t>(spm.eos_id(sp.handle));
  encode_into(sp.handle, train_text, true, train_ids);
  train_ids.push_back(eos);
  encode_into(sp.handle, val_text, true, val_ids);
  val_ids.push_back(eos);
  {
    AtomicFile f(r.model_path, kOp);
    f.write(model.data(), model.size());
    f.commit();
  }
  write_token_shard(r.train_path, train_ids, static_cast<uint32_t>(r.vocab_size));
  write_token_shard(r.val_path, val_ids, static_cast<uint32_t>(r.vocab_size));
  r.train_tokens = static_cast<int64_t>(train_ids.size());
  r.val_tokens = static_cast<int64_t>(val_ids.size());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

struct Tokenizer::Impl {
  std::unique_ptr<Model> model;
};

Tokenizer::Tokenizer(const std::string& model_path) : impl_(std::make_unique<Impl>()) {
  std::vector<uint8_t> bytes;
  io::read_file_into(model_path, kOp, bytes);
  impl_->model = std::make_unique<Model>(std::string(bytes.begin(), bytes.end()),
                                         model_path + ": not a SentencePiece model");
}

Tokenizer::~Tokenizer() = default;

int Tokenizer::vocab_size() const {
  return tokens::sentencepiece_module().vocab_size(impl_->model->handle);
}
int Tokenizer::eos_id() const {
  return tokens::sentencepiece_module().eos_id(impl_->model->handle);
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  const int64_t bad = first_invalid_utf8(text);
  TD_CHECK_ARG(bad < 0, kOp, "the text is not UTF-8 (invalid byte at offset {})", bad);
  std::vector<int> ids;
  encode_into(impl_->model->handle, text, false, ids);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  const int n = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i)
    TD_CHECK_ARG(ids[i] >= 0 && ids[i] < n, kOp, "id {} at position {} is outside [0, {})", ids[i],
                 i, n);
  char* text = nullptr;
  size_t size = 0;
  char* error = nullptr;
  check(tokens::sentencepiece_module().decode(impl_->model->handle, ids.data(), ids.size(), &text,
                                              &size, &error),
        &error, ErrorCode::format, "SentencePiece could not decode");
  const ModulePtr<char> keep(text);
  return std::string(text, size);
}

}  // namespace tandem::data
