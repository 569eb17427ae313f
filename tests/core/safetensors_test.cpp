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
