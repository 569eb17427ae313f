// Training on real image formats end to end: an image folder of JPEG and PNG files (the
// ImageNet recipe at a small --image-size), its packed copy giving the same figures, CIFAR-10
// binary files, a truncated JPEG stopping the run with the file named or, with
// --skip-corrupt, skipped and listed; show-batch writing a grid that decodes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "data/temp_dir.h"
#include "tandem/data/image_codec.h"
#include "train/run_tandem.h"

using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// A class folder set with `per_class` images of 40x30 per class in train/ and val/: class c is
// a colour ramp with its own dominant channel, so that an mlp can tell them apart. Every third
// file is a PNG.
void make_folder(const TempDir& dir, int per_class) {
  const char* classes[] = {"blue", "green", "red"};
  for (int c = 0; c < 3; ++c)
    for (const char* split : {"train", "val"}) {
      const std::string cls = dir.file(std::string(split) + "/" + classes[c]);
      fs::create_directories(cls);
      for (int i = 0; i < per_class; ++i) {
        const int w = 40 + i % 3 * 4, h = 30 + i % 2 * 6;
        Bytes rgb(static_cast<size_t>(w * h * 3));
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x)
            for (int k = 0; k < 3; ++k)
              rgb[static_cast<size_t>((y * w + x) * 3 + k)] =
                  static_cast<uint8_t>(k == 2 - c ? 200 + (x + i) % 50 : (x * 3 + y * 5 + i * 7) % 90);
        const bool png = i % 3 == 2;
        const Bytes file = png ? tandem::data::encode_png(rgb.data(), w, h) : tandem::data::encode_jpeg(rgb.data(), w, h, 90);
        write_file(cls + "/" + std::to_string(i) + (png ? ".png" : ".jpg"), file);
      }
    }
}

// The value after `key` in the line starting with `prefix` ("" when absent).
std::string field(const std::string& out, const std::string& prefix, const std::string& key) {
  const size_t line = out.find(prefix);
  if (line == std::string::npos) return "";
  const size_t at = out.find(key, line);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return out.substr(begin, out.find_first_of(" \n", begin) - begin);
}

// Batches of 6 divide the folders' 18 and 36 training images: drop_last leaves none out.
const std::string kFlags = " --model mlp --image-size 24 --batch-size 6 --eval-batch-size 16 --progress 0";
const std::string kSmall = kFlags + " --epochs 1";

}  // namespace

TEST(CliImages, FolderTrainsAndItsPackedCopyGivesTheSameFigures) {
  TempDir dir;
  make_folder(dir, 12);
  const CmdResult a = run_tandem("train --data " + dir.str() + kSmall + " --trace " + dir.file("t.json"));
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_NE(a.out.find("36 train / 36 test samples"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("data: folder, 3-channel images of varying size, 3 classes -> 3x24x24; training transform: "
                       "RandomResizedCrop 24, flip, ImageNet normalize"),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("data-wait share"), std::string::npos) << a.out;
  const std::string acc = field(a.out, "epoch 1/1", "test_acc ");
  ASSERT_FALSE(acc.empty()) << a.out;

  const CmdResult p = run_tandem("pack " + dir.str() + " " + dir.file("packed"));
  ASSERT_EQ(p.exit_code, 0) << p.out;
  const CmdResult b = run_tandem("train --data " + dir.file("packed") + kSmall + " --num-workers 3");
  ASSERT_EQ(b.exit_code, 0) << b.out;
  EXPECT_NE(b.out.find("data: packed"), std::string::npos) << b.out;
  // The same bytes, order and augmentation: the same loss and accuracy to the last digit.
  EXPECT_EQ(field(b.out, "epoch 1/1", "train_loss "), field(a.out, "epoch 1/1", "train_loss "));
  EXPECT_EQ(field(b.out, "epoch 1/1", "test_acc "), acc);
  // The page-aware order is a different order, accepted for packed shards only.
  const CmdResult c = run_tandem("train --data " + dir.file("packed") + kSmall + " --shuffle block");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  const CmdResult d = run_tandem("train --data " + dir.str() + kSmall + " --shuffle block");
  EXPECT_EQ(d.exit_code, 2) << d.out;
  EXPECT_NE(d.out.find("--shuffle block: expected packed shards"), std::string::npos) << d.out;
}

TEST(CliImages, TruncatedJpegStopsTheRunOrIsSkippedAndListed) {
  TempDir dir;
  make_folder(dir, 6);
  const std::string bad = dir.file("train/green/1.jpg");
  Bytes bytes = read_file(bad);
  bytes.resize(bytes.size() / 2);
  write_file(bad, bytes);
  const CmdResult stop = run_tandem("train --data " + dir.str() + kSmall);
  EXPECT_EQ(stop.exit_code, 2) << stop.out;
  EXPECT_NE(last_line(stop.out).find(bad), std::string::npos) << stop.out;
  const CmdResult skip = run_tandem("train --data " + dir.str() + kFlags + " --skip-corrupt --epochs 2");
  ASSERT_EQ(skip.exit_code, 0) << skip.out;
  EXPECT_NE(skip.out.find("corrupt samples skipped"), std::string::npos) << skip.out;
  // Listed at the end of each epoch, once.
  size_t listed = 0;
  for (size_t at = skip.out.find("skipped 1 corrupt training sample:"); at != std::string::npos;
       at = skip.out.find("skipped 1 corrupt training sample:", at + 1))
    ++listed;
  EXPECT_EQ(listed, 2u) << skip.out;
  EXPECT_NE(skip.out.find(bad + ": "), std::string::npos) << skip.out;
}

TEST(CliImages, CifarTenBinaryFilesTrain) {
  TempDir dir;
  Bytes records;
  for (int i = 0; i < 40; ++i) {
    const int label = i % 4;
    records.push_back(static_cast<uint8_t>(label));
    for (int k = 0; k < 3072; ++k)
      records.push_back(static_cast<uint8_t>(k / 1024 == label % 3 ? 220 : (k * 7 + i) % 60));
  }
  for (int b = 1; b <= 5; ++b) write_file(dir.file("data_batch_" + std::to_string(b) + ".bin"), records);
  write_file(dir.file("test_batch.bin"), records);
  const CmdResult r = run_tandem("train --data " + dir.str() + " --model mlp --epochs 1 --batch-size 20 --progress 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("200 train / 40 test samples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data: cifar10, 3x32x32 images, 10 classes -> 3x32x32; training transform: pad 4, random crop "
                       "32x32, flip, CIFAR-10 normalize"),
            std::string::npos)
      << r.out;
  // A file of the wrong size is one clear error.
  write_file(dir.file("data_batch_3.bin"), Bytes(3073 * 2 + 5));
  const CmdResult bad = run_tandem("train --data " + dir.str() + " --model mlp --epochs 1 --progress 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(last_line(bad.out).find("data_batch_3.bin"), std::string::npos) << bad.out;
}

TEST(CliImages, ShowBatchWritesAGridThatDecodes) {
  TempDir dir;
  make_folder(dir, 4);
  const CmdResult r =
      run_tandem("show-batch --data " + dir.str() + " --image-size 32 --count 6 --columns 3 --out " + dir.file("g.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Bytes png = read_file(dir.file("g.png"));
  std::vector<uint8_t> rgb;
  const tandem::data::ImageInfo info =
      tandem::data::decode_image(png.data(), png.size(), "g.png", tandem::data::ImageScale{}, rgb);
  // 3 columns of max(32, 8 glyphs) + 4 px, 2 rows of 32 + label + 4 px.
  EXPECT_GT(info.width, 3 * 32);
  EXPECT_GT(info.height, 2 * 32);
  // The images are there: the grid is not one colour, and some pixel is strongly red, green or blue.
  int strong = 0;
  for (size_t i = 0; i + 2 < rgb.size(); i += 3)
    if (std::max({rgb[i], rgb[i + 1], rgb[i + 2]}) > 180 && std::min({rgb[i], rgb[i + 1], rgb[i + 2]}) < 100) ++strong;
  EXPECT_GT(strong, 6 * 100) << "expected the images' dominant colours in the grid";
  const CmdResult bad = run_tandem("show-batch --data " + dir.str() + " --out " + dir.file("nodir/g.png"));
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_FALSE(fs::exists(dir.file("nodir")));
  // A grid wider than a PNG can be is refused before 16 images of 4096x4096 are made.
  TempDir big;
  make_folder(big, 6);
  const CmdResult wide = run_tandem("show-batch --data " + big.str() +
                                    " --image-size 4096 --count 16 --columns 16 --out " + big.file("g.png"));
  EXPECT_EQ(wide.exit_code, 2) << wide.out;
  EXPECT_EQ(last_line(wide.out), "tandem: error: [show-batch] a grid of 16 images of 4096x4096 in 16 columns is "
                                 "65604x4120 pixels: expected at most 65535 per side (a PNG's limit here); lower "
                                 "--count, --columns or --image-size");
  EXPECT_FALSE(fs::exists(big.file("g.png")));
  // --skip-corrupt: the replaced file is listed.
  std::string victim;
  for (const auto& e : fs::directory_iterator(big.file("val/blue"))) victim = std::max(victim, e.path().string());
  const Bytes cut = read_file(victim);
  write_file(victim, Bytes(cut.begin(), cut.begin() + 60));
  const CmdResult skip = run_tandem("show-batch --data " + big.str() + " --split test --image-size 16 --count 18 "
                                    "--skip-corrupt --out " + big.file("s.png"));
  EXPECT_EQ(skip.exit_code, 0) << skip.out;
  EXPECT_NE(skip.out.find("  skipped 1 corrupt sample:\n    sample "), std::string::npos) << skip.out;
  EXPECT_NE(skip.out.find(victim + ": "), std::string::npos) << skip.out;
}

TEST(CliImages, PackDecodesEveryImageFirstUnlessToldNot) {
  TempDir dir;
  make_folder(dir, 3);
  const std::string bad = dir.file("val/red/0.jpg");
  Bytes bytes = read_file(bad);
  bytes.resize(bytes.size() * 2 / 3);
  write_file(bad, bytes);
  const CmdResult r = run_tandem("pack " + dir.str() + " " + dir.file("out"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(last_line(r.out).find(bad + ": Premature end of JPEG file"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.file("out/manifest.json")));
  const CmdResult unchecked = run_tandem("pack " + dir.str() + " " + dir.file("out") + " --no-check");
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.out;
}
