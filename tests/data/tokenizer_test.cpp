// The tokenizer (tandem/data/tokenizer.h): UTF-8 validation, SentencePiece training (through
// the module libtandem_sentencepiece.so) that is deterministic and round-trips text, bad
// corpora and options named in one line, the `tandem tokenize` command, and a missing module.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/asan_skip.h"
#include "data/dataset_test_util.h"
#include "data/image_fixtures.h"
#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"
#include "tandem/data/tokenizer.h"
#include "tandem/error.h"
#include "train/run_tandem.h"

namespace tandem::data {
namespace {

using tandem::testing::error_of;
using tandem::testing::TempDir;

using tandem::testing::read_bytes;
void write_text(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << s;
}

TEST(Utf8, FirstInvalidByte) {
  EXPECT_EQ(first_invalid_utf8("plain ascii"), -1);
  EXPECT_EQ(first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), -1);  // é € 😀
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2);
  EXPECT_EQ(first_invalid_utf8("a\xc0\xaf"), 1);         // overlong '/'
  EXPECT_EQ(first_invalid_utf8("a\xed\xa0\x80z"), 1);    // a surrogate
  EXPECT_EQ(first_invalid_utf8("ab\xe2\x82"), 2);        // cut short
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0);  // above U+10FFFF
}

// A few thousand lines of varied English-like text (deterministic).
std::string corpus_text() {
  const char* words[] = {"the",  "quick",  "brown",   "fox",   "jumps",   "over", "lazy",  "dog",
                         "and",  "a",      "cat",     "sat",   "on",      "mat",  "while", "rain",
                         "fell", "softly", "upon",    "city",  "streets", "of",   "old",   "London",
                         "in",   "winter", "morning", "light", "was",     "grey"};
  std::string s;
  uint32_t x = 12345;
  for (int line = 0; line < 3000; ++line) {
    for (int w = 0; w < 9; ++w) {
      x = x * 1103515245u + 12345u;
      s += words[(x >> 16) % 30];
      s += w == 8 ? ".\n" : " ";
    }
  }
  return s;
}

TEST(Tokenizer, TrainsDeterministicallyAndRoundTripsText) {
  SKIP_UNDER_SANITIZER();
  TempDir dir;
  write_text(dir.file("a.txt"), corpus_text());
  TokenizeOptions o;
  o.corpus = {dir.file("a.txt")};
  o.vocab_size = 400;
  o.out_dir = dir.file("out1");
  const TokenizeResult r = tokenize_corpus(o);
  EXPECT_EQ(r.vocab_size, 400);
  const TokenShard train(r.train_path), val(r.val_path);
  EXPECT_EQ(train.size(), r.train_tokens);
  EXPECT_EQ(val.size(), r.val_tokens);
  EXPECT_GT(val.size(), 0);
  // About a tenth of the text is held out: the token counts follow the bytes.
  EXPECT_NEAR(static_cast<double>(val.size()) / static_cast<double>(train.size() + val.size()), 0.1,
              0.02);
  const Tokenizer tok(r.model_path);
  const std::string line = "the quick brown fox jumps over the lazy dog.";
  EXPECT_EQ(tok.decode(tok.encode(line)), line);
  EXPECT_EQ(tok.decode(tok.encode("naïve café")),
            "naïve café");                              // bytes outside the corpus fall back
  EXPECT_LT(tok.encode(line).size(), line.size() / 2);  // merges learned: fewer tokens than bytes
  EXPECT_EQ(train.token(train.size() - 1), static_cast<uint32_t>(tok.eos_id()));
  error_of([&] { tok.decode({0, 400}); }, ErrorCode::invalid_argument);
  // The same corpus and options give the same bytes.
  o.out_dir = dir.file("out2");
  const TokenizeResult r2 = tokenize_corpus(o);
  EXPECT_EQ(read_bytes(r.train_path), read_bytes(r2.train_path));
  EXPECT_EQ(read_bytes(r.val_path), read_bytes(r2.val_path));
  EXPECT_EQ(read_bytes(r.model_path), read_bytes(r2.model_path));
}

TEST(Tokenizer, BadCorporaAreNamed) {
  TempDir dir;
  write_text(dir.file("bad.txt"), "good text\nthen \xff bad\n");
  write_text(dir.file("empty.txt"), "\n \n");
  TokenizeOptions o;
  o.out_dir = dir.file("out");
  o.corpus = {dir.file("bad.txt")};
  EXPECT_EQ(
      error_of([&] { tokenize_corpus(o); }, ErrorCode::format),
      "[tokenize] " + dir.file("bad.txt") + ": not UTF-8 text: invalid byte 0xff at offset 15");
  o.corpus = {dir.file("empty.txt")};
  EXPECT_EQ(error_of([&] { tokenize_corpus(o); }, ErrorCode::format),
            "[tokenize] " + dir.file("empty.txt") + ": the corpus is empty (expected UTF-8 text)");
  o.corpus = {dir.file("missing.txt")};
  EXPECT_EQ(error_of([&] { tokenize_corpus(o); }, ErrorCode::io),
            "[tokenize] " + dir.file("missing.txt") + ": cannot open: No such file or directory");
  o.corpus = {dir.file("bad.txt")};
  o.vocab_size = 100;
  EXPECT_EQ(error_of([&] { tokenize_corpus(o); }, ErrorCode::invalid_argument),
            "[tokenize] --vocab-size must be in [260, 1048576], got 100");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.tok")));
}

// A vocabulary smaller than the corpus' characters: SentencePiece's reason, in one line, and
// no file written. 400 distinct CJK characters (U+4E00..) on 40 lines need more than 300 ids.
TEST(Tokenizer, AVocabularyTooSmallForTheCorpusIsNamed) {
  SKIP_UNDER_SANITIZER();
  TempDir dir;
  std::string text;
  for (int c = 0x4E00; c < 0x4E00 + 400; ++c) {
    text += static_cast<char>(0xE0 | (c >> 12));
    text += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    text += static_cast<char>(0x80 | (c & 0x3F));
    if (c % 10 == 9) text += '\n';
  }
  write_text(dir.file("cjk.txt"), text + text);
  TokenizeOptions o;
  o.corpus = {dir.file("cjk.txt")};
  o.out_dir = dir.file("out");
  o.vocab_size = 300;
  const std::string e = error_of([&] { tokenize_corpus(o); }, ErrorCode::format);
  EXPECT_EQ(e.rfind("[tokenize] SentencePiece could not train a 300-token bpe tokenizer on " +
                        dir.file("cjk.txt") + ": ",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find("Vocabulary size is smaller than required_chars"), std::string::npos) << e;
  EXPECT_NE(e.find("(in tandem: expected a larger --vocab-size"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/tokenizer.model")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.tok")));
}

TEST(Tokenizer, TheCommandWritesShardsAndRefusesBadInputInOneLine) {
  SKIP_UNDER_SANITIZER();
  TempDir dir;
  write_text(dir.file("a.txt"), corpus_text());
  const auto ok = tandem::testing::run_tandem("tokenize --corpus " + dir.file("a.txt") + " --out " +
                                              dir.file("o") + " --vocab-size 300");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("vocab 300"), std::string::npos) << ok.out;
  EXPECT_EQ(TokenShard(dir.file("o/val.tok")).vocab_size(), 300u);
  const auto bad = tandem::testing::run_tandem("tokenize --corpus " + dir.file("nope.txt") +
                                               " --out " + dir.file("o"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.out, "tandem: error: [tokenize] " + dir.file("nope.txt") +
                         ": cannot open: No such file or directory\n");
  const auto small =
      tandem::testing::run_tandem("tokenize --corpus " + dir.file("a.txt") + " --out " +
                                  dir.file("o2") + " --vocab-size 2000000");
  EXPECT_NE(small.exit_code, 0);
  EXPECT_EQ(small.out,
            "tandem: error: [tokenize] --vocab-size must be in [260, 1048576], got 2000000\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("o2")));
}

// Without the module the command says where it looked, in one line, and writes nothing.
TEST(Tokenizer, AMissingModuleIsNamedWithThePathSearched) {
  SKIP_UNDER_SANITIZER();
  TempDir dir;
  write_text(dir.file("a.txt"), corpus_text());
  const std::string missing = dir.file("no/libtandem_sentencepiece.so");
  const auto r = tandem::testing::run_tandem(
      "tokenize --corpus " + dir.file("a.txt") + " --out " + dir.file("o"), "2>&1",
      "TANDEM_SENTENCEPIECE_MODULE=" + missing);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(
      r.out,
      "tandem: error: [tokenize] the SentencePiece module libtandem_sentencepiece.so was not found "
      "(searched " +
          missing +
          "); build the target tandem_sentencepiece, or set "
          "TANDEM_SENTENCEPIECE_MODULE to its path\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("o/train.tok")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("o/tokenizer.model")));
}

}  // namespace
}  // namespace tandem::data
