// Building a run from the datasets: the model is sized from the training set's sample shape
// and classes (a 3-channel, 6-class set trains an mlp and an fmnist-cnn to high accuracy), and
// a test set of another shape or class count, or images too small for the model, are refused
// up front with one line naming both sides. The training augmentation (pad 2, random crop,
// flip) keeps each set's own image size, so any shape trains with it on.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tandem/data/synthetic_dataset.h"
#include "tandem/error.h"
#include "tandem/rng.h"
#include "tandem/train/trainer.h"

using namespace tandem;

namespace {

// n images [C, H, W] of `classes` classes: noise in [0, 60) and, for class c, a bright row
// 2c % H in channel c % C (learnable in a few steps).
class BarDataset final : public data::Dataset {
 public:
  BarDataset(int64_t n, data::ImageDims dims, int64_t classes, uint64_t seed)
      : dims_(dims), classes_(classes), pixels_(static_cast<size_t>(n * dims.numel())), labels_(static_cast<size_t>(n)) {
    Philox rng(seed, 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = rng.randint(static_cast<uint32_t>(classes));
      labels_[static_cast<size_t>(i)] = c;
      uint8_t* img = pixels_.data() + i * dims.numel();
      for (int64_t k = 0; k < dims.numel(); ++k) img[k] = static_cast<uint8_t>(rng.randint(60));
      uint8_t* row = img + ((c % dims.channels) * dims.height + (2 * c) % dims.height) * dims.width;
      for (int64_t x = 0; x < dims.width; ++x) row[x] = 255;
    }
  }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  data::ImageDims dims() const override { return dims_; }
  int64_t num_classes() const override { return classes_; }
  data::Sample get(int64_t index, std::vector<uint8_t>&) const override {
    return {pixels_.data() + index * dims_.numel(), labels_[static_cast<size_t>(index)]};
  }

 private:
  data::ImageDims dims_;
  int64_t classes_;
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
};

train::TrainConfig config(const std::string& model) {
  train::TrainConfig c;
  c.model = model;
  c.epochs = 2;
  c.batch_size = 16;
  c.eval_batch_size = 64;
  c.threads = 1;
  c.num_workers = 0;
  c.progress = 0;
  c.augment = false;
  c.schedule = "constant";
  c.data_dir = "/nonexistent";  // both sets are given
  return c;
}

std::string build_error(const train::TrainConfig& c, std::shared_ptr<const data::Dataset> train_set,
                        std::shared_ptr<const data::Dataset> test_set) {
  try {
    train::Trainer t(c, std::move(train_set), std::move(test_set));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(RunBuilder, ModelIsSizedFromAThreeChannelSixClassDataset) {
  const data::ImageDims dims{3, 12, 10};
  for (const std::string model : {"mlp", "fmnist-cnn"}) {
    train::Trainer t(config(model), std::make_shared<BarDataset>(480, dims, 6, 1),
                     std::make_shared<BarDataset>(192, dims, 6, 2));
    auto params = t.model().parameters();
    EXPECT_EQ(shape_str(params.back()->value.shape()), "[6]") << model;  // the last bias: 6 classes
    EXPECT_NE(t.describe().find("model " + model), std::string::npos);
    const train::TrainResult r = t.fit();
    ASSERT_EQ(r.epochs.size(), 2u);
    EXPECT_GE(r.epochs.back().test_accuracy, 0.9) << model;
    EXPECT_EQ(t.evaluate().samples, 192) << model;
  }
  train::Trainer mlp(config("mlp"), std::make_shared<BarDataset>(32, dims, 6, 1),
                     std::make_shared<BarDataset>(32, dims, 6, 2));
  EXPECT_EQ(shape_str(mlp.model().parameters()[0]->value.shape()), "[256, 360]");  // 3 * 12 * 10 inputs
}

TEST(RunBuilder, TrainAndTestSetsOfAnotherShapeOrClassCountAreRefused) {
  const auto fmnist = std::make_shared<data::SyntheticDataset>(64, 1);  // 1x28x28, 10 classes
  EXPECT_EQ(build_error(config("mlp"), fmnist, std::make_shared<BarDataset>(32, data::ImageDims{3, 32, 32}, 100, 2)),
            "[train] the training and test sets differ: train holds 1x28x28 images of 10 classes, test 3x32x32 "
            "images of 100 classes; expected the same sample shape and classes");
  EXPECT_EQ(build_error(config("mlp"), fmnist, std::make_shared<BarDataset>(32, data::ImageDims{1, 28, 28}, 6, 2)),
            "[train] the training and test sets differ: train holds 1x28x28 images of 10 classes, test 1x28x28 "
            "images of 6 classes; expected the same sample shape and classes");
}

TEST(RunBuilder, ImagesTooSmallForTheModelAreRefusedNamingItsMinimum) {
  const data::ImageDims tiny{1, 3, 3};
  EXPECT_EQ(build_error(config("fmnist-cnn"), std::make_shared<BarDataset>(32, tiny, 2, 1),
                        std::make_shared<BarDataset>(32, tiny, 2, 2)),
            "[model] fmnist-cnn needs images of at least 4x4 (two 2x2 max-pools), found 3x3");
  train::Trainer mlp(config("mlp"), std::make_shared<BarDataset>(32, tiny, 2, 1),
                     std::make_shared<BarDataset>(32, tiny, 2, 2));  // the mlp takes any size
  EXPECT_EQ(shape_str(mlp.model().parameters()[0]->value.shape()), "[256, 9]");
}

// The default augmentation used to crop 28x28 whatever the images: smaller sets were refused
// by the transform, larger ones fed 28x28 crops to a model sized for the full images.
TEST(RunBuilder, AugmentedTrainingKeepsTheImageSizeOfTheSet) {
  for (const data::ImageDims dims :
       {data::ImageDims{1, 8, 8}, data::ImageDims{3, 32, 32}, data::ImageDims{1, 30, 40}}) {
    for (const std::string model : {"mlp", "fmnist-cnn"}) {
      train::TrainConfig c = config(model);
      c.augment = true;
      c.epochs = 1;
      train::Trainer t(c, std::make_shared<BarDataset>(64, dims, 4, 1),
                       std::make_shared<BarDataset>(32, dims, 4, 2));
      const train::TrainResult r = t.fit();
      ASSERT_EQ(r.epochs.size(), 1u) << model << " " << dims.height << "x" << dims.width;
      EXPECT_EQ(t.evaluate().samples, 32) << model;
    }
  }
}

// An empty test set used to be accepted: every epoch reported test_loss 0 and test_acc 0%, a
// figure measured on nothing (an empty test folder of a future image-folder dataset would do it).
TEST(RunBuilder, EmptyTestSetIsRefused) {
  const data::ImageDims dims{1, 8, 8};
  EXPECT_EQ(build_error(config("mlp"), std::make_shared<BarDataset>(32, dims, 4, 1),
                        std::make_shared<BarDataset>(0, dims, 4, 2)),
            "[train] the test set holds no samples: expected at least one to evaluate");
  // An empty training set is named as such, not as a batch size larger than 0 samples.
  EXPECT_EQ(build_error(config("mlp"), std::make_shared<BarDataset>(0, dims, 4, 1),
                        std::make_shared<BarDataset>(32, dims, 4, 2)),
            "[train] the training set holds no samples: expected at least one to train on");
}
