// `tandem pack` and `tandem inspect`: a CIFAR-10 folder packs into shards that inspect reads
// back with the same counts per class; bad input exits 2 with one error line.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/temp_dir.h"
#include "train/run_tandem.h"

using namespace tandem::testing;

namespace {
// 6 CIFAR-10 records with labels 0, 1, 2, 0, 1, 2.
Bytes cifar10_records() {
  Bytes out;
  for (int i = 0; i < 6; ++i) {
    out.push_back(static_cast<uint8_t>(i % 3));
    const Bytes px = pattern(3072, static_cast<uint32_t>(i));
    out.insert(out.end(), px.begin(), px.end());
  }
  return out;
}
}  // namespace

TEST(CliData, PackThenInspect) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("src"));
  for (int b = 1; b <= 5; ++b) write_file(dir.file("src/data_batch_" + std::to_string(b) + ".bin"), cifar10_records());
  write_file(dir.file("src/test_batch.bin"), cifar10_records());
  const CmdResult p = run_tandem("pack " + dir.file("src") + " " + dir.file("out") + " --shard-size-mb 1");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_NE(p.out.find("packed 36 records (train 30, test 6)"), std::string::npos) << p.out;
  const CmdResult i = run_tandem("inspect --data " + dir.file("out"));
  ASSERT_EQ(i.exit_code, 0) << i.out;
  EXPECT_NE(i.out.find("format packed (detected)"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("train: 30 samples, 10 classes, dims [3, 32, 32]"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("   2  2                        10"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("test: 6 samples"), std::string::npos) << i.out;
}

TEST(CliData, BadInputExitsTwoWithOneLine) {
  TempDir dir;
  CmdResult r = run_tandem("inspect --data " + dir.str());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("tandem: error: [dataset] " + dir.str() + ": no dataset found"), std::string::npos) << r.out;
  r = run_tandem("pack " + dir.str() + " " + dir.file("out") + " --shard-size-mb 0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = run_tandem("inspect --data " + dir.str() + " --format imagenet");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown dataset format 'imagenet'"), std::string::npos) << r.out;
}
