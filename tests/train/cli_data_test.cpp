// `tandem pack` and `tandem inspect`: a CIFAR-10 folder packs into shards that inspect reads
// back with the same counts per class; bad input exits 2 with one error line.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/temp_dir.h"
#include "tandem/data/image_codec.h"
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
  // The source folder's format is reported, and OUT may not be SRC or inside it.
  EXPECT_NE(p.out.find("from " + dir.file("src") + " (cifar10)"), std::string::npos) << p.out;
  for (const std::string& out : {dir.file("src"), dir.file("src/.")}) {
    const CmdResult bad = run_tandem("pack " + dir.file("src") + " " + out);
    EXPECT_EQ(bad.exit_code, 2) << bad.out;
    EXPECT_EQ(last_line(bad.out), "tandem: error: [pack] OUT " + out + " is the same folder as SRC " +
                                      dir.file("src") + ": expected a folder outside it");
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("src/manifest.json")));
  // A flat image folder: a pack inside it would become a class of .tpk files.
  std::filesystem::create_directories(dir.file("flat/a"));
  write_file(dir.file("flat/a/1.png"), {});  // not read: the check comes first
  const CmdResult bad = run_tandem("pack " + dir.file("flat") + " " + dir.file("flat/packed") + " --val-split 0.5");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_EQ(last_line(bad.out), "tandem: error: [pack] OUT " + dir.file("flat/packed") + " is inside SRC " +
                                    dir.file("flat") + ", in the class folders it reads: expected a folder outside them");
  EXPECT_FALSE(std::filesystem::exists(dir.file("flat/packed")));
}

TEST(CliData, BadInputExitsTwoWithOneLine) {
  TempDir dir;
  CmdResult r = run_tandem("inspect --data " + dir.str());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("tandem: error: [dataset] " + dir.str() + ": no dataset found"), std::string::npos) << r.out;
  r = run_tandem("pack " + dir.str() + " " + dir.file("out") + " --shard-size-mb 0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = run_tandem("inspect --data " + dir.str() + " --dataset imagenet");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown dataset format 'imagenet'"), std::string::npos) << r.out;
  // The same flag name as train and show-batch.
  r = run_tandem("inspect --data " + dir.str() + " --dataset imagenet");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown dataset format 'imagenet'"), std::string::npos) << r.out;
  r = run_tandem("pack " + dir.str() + " " + dir.file("out") + " --dataset imagenet");
  EXPECT_NE(r.out.find("unknown dataset format 'imagenet'"), std::string::npos) << r.out;
  // Normalization flags: each mistake named as itself, not as a count mismatch.
  const std::string show = "show-batch --data " + dir.str() + " --out " + dir.file("g.png");
  r = run_tandem(show + " --std 0.2");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(last_line(r.out), "tandem: error: [show-batch] --std given without --mean: expected both (or neither, "
                              "for the dataset's own)");
  r = run_tandem(show + " --mean 0.5");
  EXPECT_EQ(last_line(r.out), "tandem: error: [show-batch] --mean given without --std: expected both (or neither, "
                              "for the dataset's own)");
  r = run_tandem(show + " --mean nan,0.5,0.5");
  EXPECT_EQ(last_line(r.out), "tandem: error: [show-batch] --mean: expected finite values, got nan");
  r = run_tandem(show + " --mean 0.5,0.5,0.5 --std 1,0,1");
  EXPECT_EQ(last_line(r.out), "tandem: error: [show-batch] --std: expected finite values > 0, got 0");
}

TEST(CliData, InspectImageFolderSizesAndDecodeRate) {
  TempDir dir;
  for (int i = 0; i < 5; ++i) {
    const int w = 10 + 10 * i, h = 60 - 10 * i;
    const Bytes rgb = pattern(static_cast<size_t>(w * h * 3), static_cast<uint32_t>(i));
    const Bytes file = tandem::data::encode_jpeg(rgb.data(), w, h, 80);
    const std::string cls = dir.file(i < 2 ? "train/x" : "train/y");
    std::filesystem::create_directories(cls);
    write_file(cls + "/" + std::to_string(i) + ".jpg", file);
    std::filesystem::create_directories(dir.file(i < 2 ? "val/x" : "val/y"));
  }
  write_file(dir.file("val/x/v.jpg"), read_file(dir.file("train/x/0.jpg")));
  write_file(dir.file("val/y/v.jpg"), read_file(dir.file("train/y/4.jpg")));
  const CmdResult r = run_tandem("inspect --data " + dir.str() + " --size-samples 0 --decode-samples 3");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("format folder (detected)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train: 5 samples, 2 classes, dims [3, 0, 0] (sizes vary)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("image size over all 5 samples (from the headers): width min/median/max 10 / 30 / 50, "
                       "height 20 / 40 / 60; 5 JPEG, 0 PNG"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("decode: 3 images in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test: 2 samples"), std::string::npos) << r.out;
  // Corrupt files are counted and named; the survey goes on over the others.
  const Bytes good = read_file(dir.file("train/y/3.jpg"));
  write_file(dir.file("train/y/3.jpg"), Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  write_file(dir.file("train/y/2.jpg"), Bytes(5, 0xFF));
  const CmdResult c = run_tandem("inspect --data " + dir.str() + " --size-samples 0 --decode-samples 5");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("image size over 4 evenly spaced samples"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("decode: 3 images in"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("  unreadable or corrupt: 2 of the sampled files:\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("\n    [image folder] " + dir.file("train/y/2.jpg") + ": expected JPEG or PNG bytes, found 5 bytes"),
            std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("\n    " + dir.file("train/y/3.jpg") + ": Premature end of JPEG file"), std::string::npos)
      << c.out;
}
