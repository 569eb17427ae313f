#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tandem/safetensors.h"

using namespace tandem;
namespace fs = std::filesystem;

static std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tandem_st_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(Safetensors, RoundTripDtypesAndMetadata) {
  const std::string p = temp_path("rt.safetensors");
  Tensor a = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::empty({}, DType::i64);
  b.fill(42);
  Tensor c = a.to(DType::bf16);
  save_safetensors(p, {{"0.weight", a}, {"1.num_batches_tracked", b}, {"half", c}}, {{"format", "pt"}});
  std::map<std::string, std::string> meta;
  NamedTensors r = load_safetensors(p, &meta);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].first, "0.weight");
  EXPECT_EQ(r[0].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(r[0].second.to_vector(), a.to_vector());
  EXPECT_EQ(r[1].second.dim(), 0);
  EXPECT_EQ(r[1].second.dtype(), DType::i64);
  EXPECT_EQ(r[1].second.item(), 42);
  EXPECT_EQ(r[2].second.dtype(), DType::bf16);
  EXPECT_EQ(r[2].second.item(4), 5.0);
  EXPECT_EQ(meta["format"], "pt");
  // header is 8-byte aligned
  std::ifstream in(p, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ(len % 8, 0u);
  fs::remove(p);
}

TEST(Safetensors, TruncatedAndCorruptFilesAreRejected) {
  const std::string p = temp_path("bad.safetensors");
  save_safetensors(p, {{"w", Tensor::from_vector({4}, {1, 2, 3, 4})}});
  const auto size = fs::file_size(p);
  fs::resize_file(p, size - 3);
  try {
    load_safetensors(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << "garbage";
  }
  EXPECT_THROW(load_safetensors(p), Error);
  fs::remove(p);
  try {
    load_safetensors(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
  }
}

TEST(Safetensors, FailedWriteLeavesOldFileAndNoTemporary) {
  const std::string dir = temp_path("dir");
  fs::create_directories(dir);
  const std::string p = dir + "/w.safetensors";
  save_safetensors(p, {{"w", Tensor::from_vector({1}, {7})}});
  EXPECT_THROW(save_safetensors(p, {{"w", Tensor::from_vector({1}, {1})}, {"w", Tensor::from_vector({1}, {2})}}),
               Error);
  EXPECT_EQ(load_safetensors(p)[0].second.item(), 7);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_THROW(save_safetensors(dir + "/missing/x.safetensors", {{"w", Tensor::from_vector({1}, {1})}}), Error);
  fs::remove_all(dir);
}

// A file whose entries share bytes (400 names over one range) would claim many times its size
// in tensors; offsets that are not integers (16.5) or dimensions past 2^63 are named as such.
static void write_raw_safetensors(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t len = header.size();
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(len >> (8 * i));
  out.write(reinterpret_cast<const char*>(b), 8);
  out << header << std::string(data_bytes, '\0');
}

static std::string load_error(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format) << e.what();
    return e.what();
  }
  ADD_FAILURE() << path << " loaded";
  return "";
}

TEST(Safetensors, OverlapsFractionalOffsetsAndHugeDimensionsAreRefused) {
  const std::string p = temp_path("hostile.safetensors");
  write_raw_safetensors(p,
                        R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                        R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                        24);
  EXPECT_NE(load_error(p).find("entries 'a' and 'b' overlap"), std::string::npos);
  write_raw_safetensors(p, R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0.0,16.5]}})", 16);
  EXPECT_NE(load_error(p).find("data_offsets must be [begin, end], two integers >= 0"), std::string::npos);
  write_raw_safetensors(p, R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,1]}})", 1);
  EXPECT_NE(load_error(p).find("dimension 18446744073709551615 is past 2^63"), std::string::npos);
  // Empty tensors may share an offset with the next one: not an overlap.
  write_raw_safetensors(p,
                        R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                        R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                        8);
  EXPECT_EQ(load_safetensors(p).size(), 2u);
  fs::remove(p);
}
