// A made-up English-like corpus for tokenizer and language-model tests: `lines` lines of 8
// words drawn from 20 common ones by a linear congruential generator seeded with `seed`, each
// line ending in ".\n". The same (lines, seed) give the same text.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::testing {

inline std::string word_corpus(int lines, uint32_t seed) {
  const char* words[] = {"the",   "quick", "brown", "fox",    "jumps", "over", "lazy",
                         "dog",   "and",   "a",     "cat",    "sat",   "on",   "mat",
                         "while", "rain",  "fell",  "softly", "upon",  "city"};
  std::string s;
  uint32_t x = seed;
  for (int line = 0; line < lines; ++line)
    for (int w = 0; w < 8; ++w) {
      x = x * 1103515245u + 12345u;
      s += words[(x >> 16) % 20];
      s += w == 7 ? ".\n" : " ";
    }
  return s;
}

}  // namespace tandem::testing
