// libtandem_sentencepiece.so: the C interface of tandem_sentencepiece.h over Debian's
// libsentencepiece (Kudo and Richardson 2018). Built as a CMake MODULE library: it is only
// ever dlopen'd (src/data/tokens/sentencepiece_module.cpp), never linked.
#include "sentencepiece/tandem_sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

// Exported by libsentencepiece (its common.h, which Debian does not install): quiets the
// trainer's INFO lines, which --minloglevel silences only after printing the first.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace {

char* copy_out(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
  }
  return p;
}

int fail(char** error, std::string_view message) {
  if (error) *error = copy_out(message);
  return 1;
}

// The training text's non-empty lines, as SentencePiece reads sentences.
class Lines final : public sentencepiece::SentenceIterator {
 public:
  explicit Lines(std::string_view text) : text_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (pos_ < text_.size()) {
      const size_t nl = text_.find('\n', pos_);
      const size_t end = nl == std::string_view::npos ? text_.size() : nl;
      line_.assign(text_.substr(pos_, end - pos_));
      pos_ = end + 1;
      if (!line_.empty()) return;
    }
    done_ = true;
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  std::string line_;
  bool done_ = false;
};

const sentencepiece::SentencePieceProcessor& sp(const void* h) {
  return *static_cast<const sentencepiece::SentencePieceProcessor*>(h);
}

}  // namespace

extern "C" {

int tsp_abi_version(void) {
  return TSP_ABI_VERSION;
}

int tsp_train(const char* text, size_t size, const char* args, char** model, size_t* model_size,
              char** error) try {
  sentencepiece::logging::SetMinLogLevel(2);
  Lines lines(std::string_view(text, size));
  std::string out;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &lines, &out);
  if (!st.ok()) return fail(error, st.ToString());
  *model = static_cast<char*>(std::malloc(out.size() ? out.size() : 1));
  if (!*model) return fail(error, "out of memory");
  std::memcpy(*model, out.data(), out.size());
  *model_size = out.size();
  return 0;
} catch (const std::exception& e) {
  return fail(error, e.what());
}

int tsp_load(const char* model, size_t size, void** handle, char** error) try {
  auto* p = new sentencepiece::SentencePieceProcessor();
  const auto st = p->LoadFromSerializedProto(std::string_view(model, size));
  if (!st.ok()) {
    delete p;
    return fail(error, st.ToString());
  }
  *handle = p;
  return 0;
} catch (const std::exception& e) {
  return fail(error, e.what());
}

void tsp_unload(void* handle) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}
int tsp_vocab_size(const void* handle) {
  return sp(handle).GetPieceSize();
}
int tsp_eos_id(const void* handle) {
  return sp(handle).eos_id();
}

int tsp_encode(const void* handle, const char* text, size_t size, int by_line, int32_t** ids,
               size_t* count, char** error) try {
  const std::string_view all(text, size);
  std::vector<int32_t> out;
  std::vector<int> part;
  size_t pos = 0;
  while (pos < all.size() || (!by_line && pos == 0)) {
    size_t end = all.size();
    if (by_line) {
      const size_t nl = all.find('\n', pos);
      if (nl != std::string_view::npos) end = nl;
    }
    if (end > pos || !by_line) {
      const auto st = sp(handle).Encode(all.substr(pos, end - pos), &part);
      if (!st.ok()) return fail(error, st.ToString());
      out.insert(out.end(), part.begin(), part.end());
    }
    pos = end + 1;
  }
  *ids = static_cast<int32_t*>(std::malloc((out.empty() ? 1 : out.size()) * sizeof(int32_t)));
  if (!*ids) return fail(error, "out of memory");
  if (!out.empty()) std::memcpy(*ids, out.data(), out.size() * sizeof(int32_t));
  *count = out.size();
  return 0;
} catch (const std::exception& e) {
  return fail(error, e.what());
}

int tsp_decode(const void* handle, const int32_t* ids, size_t count, char** text, size_t* size,
               char** error) try {
  const std::vector<int> v(ids, ids + count);
  std::string out;
  const auto st = sp(handle).Decode(v, &out);
  if (!st.ok()) return fail(error, st.ToString());
  *text = copy_out(out);
  if (!*text) return fail(error, "out of memory");
  *size = out.size();
  return 0;
} catch (const std::exception& e) {
  return fail(error, e.what());
}

void tsp_free(void* p) {
  std::free(p);
}

}  // extern "C"
