// TensorBoard event files: the CRC32C against the standard check value, the record framing
// read back byte by byte, and the file loaded by TensorBoard's EventAccumulator (the peers
// venv's tensorboard package; skipped, saying why, when it is not there).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "data/temp_dir.h"
#include "metrics/tb_readback.h"
#include "tandem/error.h"
#include "tandem/metrics/tensorboard.h"

namespace tandem::metrics {
namespace {

using testing::TempDir;

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

TEST(Crc32c, CheckValuesOfTheCastagnoliPolynomial) {
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);  // the catalogue's check value for CRC-32C
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::string zeros(32, '\0');  // RFC 3720, B.4: 32 bytes of zeros
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  const uint32_t c = crc32c("123456789", 9);
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoardWriter, RecordsAreFramedWithMaskedCrcs) {
  TempDir dir;
  std::string path;
  {
    TensorBoardWriter w(dir.str() + "/logs");  // a missing folder is made
    w.add_scalar(7, "train/loss", 0.5);
    path = w.path();
  }
  EXPECT_NE(std::filesystem::path(path).filename().string().find("tfevents"), std::string::npos);
  const auto bytes = testing::read_file(path);
  size_t pos = 0;
  int records = 0;
  std::string first;
  while (pos < bytes.size()) {
    ASSERT_LE(pos + 12, bytes.size());
    const uint64_t len = le(&bytes[pos], 8);
    EXPECT_EQ(le(&bytes[pos + 8], 4), masked_crc32c(&bytes[pos], 8));
    ASSERT_LE(pos + 12 + len + 4, bytes.size());
    EXPECT_EQ(le(&bytes[pos + 12 + len], 4), masked_crc32c(&bytes[pos + 12], len));
    if (records == 0) first.assign(bytes.begin() + static_cast<long>(pos) + 12, bytes.begin() + static_cast<long>(pos + 12 + len));
    pos += 12 + len + 4;
    ++records;
  }
  EXPECT_EQ(records, 2);
  EXPECT_NE(first.find("brain.Event:2"), std::string::npos);  // file_version, field 3
}

TEST(TensorBoardWriter, AFileInPlaceOfTheFolderIsAnIoError) {
  TempDir dir;
  testing::write_file(dir.file("x"), {1});
  try {
    TensorBoardWriter w(dir.file("x"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    EXPECT_NE(std::string(e.what()).find(dir.file("x")), std::string::npos) << e.what();
  }
}

TEST(TensorBoardWriter, TensorBoardReadsTheScalarsBack) {
  TempDir dir;
  {
    TensorBoardWriter w(dir.str());
    for (int s = 1; s <= 5; ++s) w.add_scalars(10 * s, {{"train/loss", 1.0 / s}, {"train/lr", 0.001 * s}});
    w.add_scalar(50, "epoch/test_accuracy", 0.8125);
  }
  const TbReadback r = read_with_tensorboard(dir.str());
  if (!r.available) GTEST_SKIP() << r.why;
  ASSERT_TRUE(r.ok) << r.why;
  const auto& loss = r.scalars.at("train/loss");
  ASSERT_EQ(loss.size(), 5u);
  for (int s = 1; s <= 5; ++s) {
    EXPECT_EQ(loss[static_cast<size_t>(s - 1)].first, 10 * s);
    EXPECT_FLOAT_EQ(loss[static_cast<size_t>(s - 1)].second, static_cast<float>(1.0 / s));
    EXPECT_FLOAT_EQ(r.scalars.at("train/lr")[static_cast<size_t>(s - 1)].second, static_cast<float>(0.001 * s));
  }
  ASSERT_EQ(r.scalars.at("epoch/test_accuracy").size(), 1u);
  EXPECT_EQ(r.scalars.at("epoch/test_accuracy")[0].first, 50);
  EXPECT_FLOAT_EQ(r.scalars.at("epoch/test_accuracy")[0].second, 0.8125f);
}

}  // namespace
}  // namespace tandem::metrics
