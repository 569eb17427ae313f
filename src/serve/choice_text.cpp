#include "serve/choice_text.h"

#include <algorithm>

#include "serve/completions.h"

namespace tandem::serve {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD, what an incomplete character decodes to

}  // namespace

ChoiceText::ChoiceText(const data::Tokenizer* tokenizer, std::vector<std::string> stop)
    : tokenizer_(tokenizer), stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

std::string ChoiceText::release(size_t upto) {
  // The decoded text of the tokens so far starts with what was released, unless decoding one
  // more token changed earlier text; then nothing more is released until it does again.
  if (upto <= sent_.size() || full_.compare(0, sent_.size(), sent_) != 0) return "";
  std::string part = full_.substr(sent_.size(), upto - sent_.size());
  sent_ += part;
  return part;
}

std::string ChoiceText::add(int64_t id) {
  if (!tokenizer_ || stopped_) return "";
  ids_.push_back(id);
  full_ = decode_text(*tokenizer_, ids_);
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, full_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    return release(cut);
  }
  size_t safe = full_.size();
  const size_t r = sizeof kReplacement - 1;
  while (safe >= sent_.size() + r && full_.compare(safe - r, r, kReplacement) == 0) safe -= r;
  size_t hold = 0;  // the longest tail that begins a stop string
  for (const std::string& s : stop_)
    for (size_t len = std::min(s.size() - 1, safe - std::min(safe, sent_.size())); len > hold;
         --len)
      if (full_.compare(safe - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  return release(safe - hold);
}

std::string ChoiceText::finish() {
  if (stopped_) return "";
  return release(full_.size());
}

}  // namespace tandem::serve
