// The text of one completion choice as its tokens come, for streaming and stop strings: each
// token releases the part of the decoded text it adds, except a tail that could still be the
// start of a stop string (or an incomplete UTF-8 character, decoded as U+FFFD until its next
// byte comes), which is held back until it cannot; the first stop string ends the choice and
// the text is cut before it. The released parts concatenate to text().
// Thread-safety: one thread per object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/tokenizer.h"

namespace tandem::serve {

class ChoiceText {
 public:
  /// `tokenizer` null: every token releases "" and stop strings never match. `stop`: non-empty
  /// strings.
  ChoiceText(const data::Tokenizer* tokenizer, std::vector<std::string> stop);
  /// Adds token `id` (ids the tokenizer does not have decode to nothing); the text it releases.
  std::string add(int64_t id);
  /// The held-back tail, for a choice that ended without a stop string; "" after stopped().
  std::string finish();
  /// True once the decoded text holds a stop string.
  bool stopped() const { return stopped_; }
  /// Everything released so far.
  const std::string& text() const { return sent_; }

 private:
  std::string release(size_t upto);

  const data::Tokenizer* tokenizer_;
  std::vector<std::string> stop_;
  std::vector<int64_t> ids_;
  std::string full_, sent_;
  bool stopped_ = false;
};

}  // namespace tandem::serve
