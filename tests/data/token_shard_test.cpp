// Token shards and the tokenizer (tandem/data/token_shard.h, tokenizer.h): round trips in both
// id widths, every kind of damaged shard named in one line, UTF-8 validation, SentencePiece
// training that is deterministic and round-trips text, and the `tandem tokenize` command.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset_test_util.h"
#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"
#include "tandem/data/tokenizer.h"
#include "tandem/error.h"
#include "train/run_tandem.h"

namespace tandem::data {
namespace {

using tandem::testing::error_of;
using tandem::testing::TempDir;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void write_text(const std::string& path, const std::string& s) { write_bytes(path, {s.begin(), s.end()}); }

uint32_t crc(const uint8_t* p, size_t n) { return static_cast<uint32_t>(::crc32(::crc32(0, Z_NULL, 0), p, n)); }
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
// Rewrites the header CRC after an edit of the header, so that the check after it is reached.
void fix_header_crc(std::vector<uint8_t>& b) { put_u32(b.data() + 60, crc(b.data(), 60)); }

TEST(TokenShard, RoundTripsInBothIdWidths) {
  TempDir dir;
  for (uint32_t vocab : {50257u, 65536u, 70000u}) {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < 1001; ++i) ids.push_back((i * 7919u) % vocab);
    ids.push_back(vocab - 1);
    const std::string path = dir.file("s.tok");
    write_token_shard(path, ids, vocab);
    const TokenShard s(path);
    EXPECT_EQ(s.size(), static_cast<int64_t>(ids.size()));
    EXPECT_EQ(s.vocab_size(), vocab);
    EXPECT_EQ(s.token_bytes(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(std::filesystem::file_size(path), kTokenShardHeaderBytes + ids.size() * s.token_bytes());
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(s.token(static_cast<int64_t>(i)), ids[i]) << i;
    std::vector<int32_t> window(5);
    s.tokens(997, 5, window.data());
    for (int k = 0; k < 5; ++k) EXPECT_EQ(window[k], static_cast<int32_t>(ids[997 + k]));
    error_of([&] { s.tokens(999, 5, window.data()); }, ErrorCode::invalid_argument);
  }
  error_of([&] { write_token_shard(dir.file("x.tok"), {1, 2, 9}, 9); }, ErrorCode::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.tok")));  // nothing half-written
}

TEST(TokenShard, EveryDamageIsNamedInOneLine) {
  TempDir dir;
  const std::string path = dir.file("v.tok");
  write_token_shard(path, {3, 1, 4, 1, 5, 9, 2, 6}, 10);
  const std::vector<uint8_t> good = read_bytes(path);
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> edit;
  };
  const std::vector<Case> cases = {
      {"bad magic: expected \"TNDMTOKS\"", [](auto& b) { b[0] = 'X'; }},
      {"unsupported token shard version 2: this build reads version 1",
       [](auto& b) { put_u32(b.data() + 8, 2), fix_header_crc(b); }},
      {"header CRC32 mismatch", [](auto& b) { b[16] ^= 1; }},
      {"truncated: the header says 8 tokens of 2 bytes, the file holds 14 bytes", [](auto& b) { b.resize(b.size() - 2); }},
      {"truncated: 10 bytes, expected at least the 64-byte header", [](auto& b) { b.resize(10); }},
      {"3 trailing bytes after the 8 tokens", [](auto& b) { b.insert(b.end(), {0, 0, 0}); }},
      {"payload CRC32 mismatch: the token ids are corrupt", [](auto& b) { b[64] ^= 1; }},
      {"token 9 at position 5 is not below the vocab size 8",
       [](auto& b) { put_u32(b.data() + 16, 8), fix_header_crc(b); }},
      {"expected 2- or 4-byte token ids, found 3", [](auto& b) { put_u32(b.data() + 20, 3), fix_header_crc(b); }},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good;
    c.edit(b);
    write_bytes(path, b);
    const std::string msg = error_of([&] { TokenShard s(path); }, ErrorCode::format);
    EXPECT_EQ(msg.rfind("[token_shard] " + path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  error_of([&] { TokenShard s(dir.file("missing.tok")); }, ErrorCode::io);
  error_of([&] { TokenShard s(dir.str()); }, ErrorCode::io);
}

TEST(Utf8, FirstInvalidByte) {
  EXPECT_EQ(first_invalid_utf8("plain ascii"), -1);
  EXPECT_EQ(first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), -1);  // é € 😀
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2);
  EXPECT_EQ(first_invalid_utf8("a\xc0\xaf"), 1);          // overlong '/'
  EXPECT_EQ(first_invalid_utf8("a\xed\xa0\x80z"), 1);     // a surrogate
  EXPECT_EQ(first_invalid_utf8("ab\xe2\x82"), 2);         // cut short
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0);   // above U+10FFFF
}

// A few thousand lines of varied English-like text (deterministic).
std::string corpus_text() {
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "a",
                         "cat", "sat", "on", "mat", "while", "rain", "fell", "softly", "upon", "city",
                         "streets", "of", "old", "London", "in", "winter", "morning", "light", "was", "grey"};
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
  EXPECT_NEAR(static_cast<double>(val.size()) / static_cast<double>(train.size() + val.size()), 0.1, 0.02);
  const Tokenizer tok(r.model_path);
  const std::string line = "the quick brown fox jumps over the lazy dog.";
  EXPECT_EQ(tok.decode(tok.encode(line)), line);
  EXPECT_EQ(tok.decode(tok.encode("naïve café")), "naïve café");  // bytes outside the corpus fall back
  EXPECT_LT(tok.encode(line).size(), line.size() / 2);             // merges learned: fewer tokens than bytes
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
  EXPECT_EQ(error_of([&] { tokenize_corpus(o); }, ErrorCode::format),
            "[tokenize] " + dir.file("bad.txt") + ": not UTF-8 text: invalid byte 0xff at offset 15");
  o.corpus = {dir.file("empty.txt")};
  EXPECT_EQ(error_of([&] { tokenize_corpus(o); }, ErrorCode::format),
            "[tokenize] " + dir.file("empty.txt") + ": the corpus is empty (expected UTF-8 text)");
  o.corpus = {dir.file("missing.txt")};
  error_of([&] { tokenize_corpus(o); }, ErrorCode::io);
  o.corpus = {dir.file("bad.txt")};
  o.vocab_size = 100;
  EXPECT_NE(error_of([&] { tokenize_corpus(o); }, ErrorCode::invalid_argument).find("--vocab-size must be in [260"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.tok")));
}

TEST(Tokenizer, TheCommandWritesShardsAndRefusesBadInputInOneLine) {
  TempDir dir;
  write_text(dir.file("a.txt"), corpus_text());
  const auto ok = tandem::testing::run_tandem("tokenize --corpus " + dir.file("a.txt") + " --out " + dir.file("o") +
                                              " --vocab-size 300");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("vocab 300"), std::string::npos) << ok.out;
  EXPECT_EQ(TokenShard(dir.file("o/val.tok")).vocab_size(), 300u);
  const auto bad = tandem::testing::run_tandem("tokenize --corpus " + dir.file("nope.txt") + " --out " + dir.file("o"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.out, "tandem: error: [tokenize] " + dir.file("nope.txt") + ": cannot open: No such file or directory\n");
}

}  // namespace
}  // namespace tandem::data
