// The image pipeline end to end in the loader: an image folder of JPEG and PNG files of
// different sizes through ImageTransform (RandomResizedCrop + flip + normalize, and the
// evaluation transform) gives the same batches, bit for bit, for num_workers 0, 1 and 4, and
// the same again from its packed copy (tandem pack's format), also when the shards are small.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "data/temp_dir.h"
#include "tandem/data/image_codec.h"
#include "tandem/data/image_folder.h"
#include "tandem/data/image_transform.h"
#include "tandem/data/loader.h"
#include "tandem/data/packed.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// 3 classes x 7 images in train/ and 2 in val/, sizes 30..66 x 20..48, every third a PNG.
void make_folder(const TempDir& dir) {
  for (int c = 0; c < 3; ++c)
    for (const char* split : {"train", "val"}) {
      const std::string cls = dir.file(std::string(split) + "/class" + std::to_string(c));
      fs::create_directories(cls);
      const int n = std::string(split) == "train" ? 7 : 2;
      for (int i = 0; i < n; ++i) {
        const int w = 30 + 6 * i, h = 20 + 4 * ((i + c) % 8);
        const Bytes rgb = pattern(static_cast<size_t>(w * h * 3), static_cast<uint32_t>(c * 100 + i));
        const bool png = i % 3 == 2;
        write_file(cls + "/" + std::to_string(i) + (png ? ".png" : ".jpg"),
                   png ? encode_png(rgb.data(), w, h) : encode_jpeg(rgb.data(), w, h, 85));
      }
    }
}

struct Epoch {
  std::vector<float> images;
  std::vector<int64_t> labels;
};

Epoch read_epoch(std::shared_ptr<const Dataset> set, std::shared_ptr<const Transform> tf, int workers, bool shuffle,
                 uint64_t epoch) {
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = workers;
  o.shuffle = shuffle;
  o.seed = 11;
  Loader loader(std::move(set), std::move(tf), o);
  loader.begin_epoch(epoch);
  Epoch e;
  Batch b;
  while (loader.next(b)) {
    e.images.insert(e.images.end(), b.input().data<float>(), b.input().data<float>() + b.input().numel());
    e.labels.insert(e.labels.end(), b.target().data<int64_t>(), b.target().data<int64_t>() + b.size());
  }
  return e;
}

bool same_bits(const Epoch& a, const Epoch& b) {
  return a.labels == b.labels && a.images.size() == b.images.size() &&
         std::memcmp(a.images.data(), b.images.data(), a.images.size() * sizeof(float)) == 0;
}

std::shared_ptr<ImageTransform> transform(ImageTransformMode mode) {
  ImageTransformOptions o;
  o.mode = mode;
  o.size = 16;
  o.resize_size = 18;
  return std::make_shared<ImageTransform>(o);
}

}  // namespace

TEST(ImagePipeline, SameBatchesForAnyWorkersAndFromThePackedCopy) {
  TempDir dir;
  make_folder(dir);
  auto train = std::make_shared<ImageFolder>(dir.str(), Split::train);
  auto val = std::make_shared<ImageFolder>(dir.str(), Split::test);
  ASSERT_EQ(train->size(), 21);
  PackOptions po;
  po.shard_size_bytes = 4096;  // several shards
  const PackResult pr = write_packed({{"train", train.get()}, {"test", val.get()}}, dir.file("packed"), po);
  EXPECT_GT(pr.shards, 2);
  auto packed_train = std::make_shared<PackedDataset>(dir.file("packed"), Split::train);
  auto packed_val = std::make_shared<PackedDataset>(dir.file("packed"), Split::test);

  const auto aug = transform(ImageTransformMode::train);
  const auto eval = transform(ImageTransformMode::eval);
  for (uint64_t epoch : {0u, 3u}) {
    const Epoch ref = read_epoch(train, aug, 0, true, epoch);
    ASSERT_EQ(ref.labels.size(), 21u);
    ASSERT_EQ(ref.images.size(), 21u * 3 * 16 * 16);
    for (int w : {1, 4}) EXPECT_TRUE(same_bits(ref, read_epoch(train, aug, w, true, epoch))) << w << " workers";
    for (int w : {0, 1, 4})
      EXPECT_TRUE(same_bits(ref, read_epoch(packed_train, aug, w, true, epoch))) << "packed, " << w << " workers";
  }
  // Epochs differ (order and crops), evaluation is the same every epoch and from the shards.
  EXPECT_FALSE(same_bits(read_epoch(train, aug, 0, true, 0), read_epoch(train, aug, 0, true, 1)));
  const Epoch ev = read_epoch(val, eval, 0, false, 0);
  EXPECT_EQ(ev.labels, (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_TRUE(same_bits(ev, read_epoch(val, eval, 2, false, 5)));
  EXPECT_TRUE(same_bits(ev, read_epoch(packed_val, eval, 4, false, 0)));
}
