#include "train/data_recipe.h"

#include <fmt/format.h>

#include "tandem/data/block_shuffle_sampler.h"
#include "tandem/data/fused_image_transform.h"
#include "tandem/data/image_transform.h"
#include "tandem/data/packed.h"
#include "tandem/error.h"

namespace tandem::train {

namespace {

struct Normalization {
  std::vector<float> mean, std;
  std::string name;
};

// Published per-channel statistics of each set's training images (pixels in [0, 1]): Xiao et
// al.'s Fashion-MNIST (as in the reference recipe), CIFAR-10/100's, ImageNet's (torchvision).
Normalization default_normalization(const data::Dataset& set, data::DatasetFormat format) {
  const data::ImageDims d = set.dims();
  if (d.channels == 1) return {{0.2860f}, {0.3530f}, "Fashion-MNIST"};
  if (d.height == 0 || format == data::DatasetFormat::folder)
    return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, "ImageNet"};
  if (format == data::DatasetFormat::cifar100) return {{0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}, "CIFAR-100"};
  return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}, "CIFAR-10"};
}

// Raw images at their own size: pad + random crop + flip (pad 2 for 28x28 as in the
// Fashion-MNIST recipe, pad 4 for 32x32 as in the CIFAR one), Normalize.
Transforms raw_transforms(const data::ImageDims& d, const Normalization& norm, bool augment) {
  Transforms t;
  data::FusedImageTransformOptions eval;
  eval.mean = norm.mean;
  eval.std = norm.std;
  data::FusedImageTransformOptions train = eval;
  train.pad = d.height >= 32 ? d.height / 8 : 2;
  train.flip_p = 0.5f;
  t.eval = std::make_shared<data::FusedImageTransform>(eval);
  t.train = augment ? std::make_shared<data::FusedImageTransform>(train) : t.eval;
  t.describe = augment ? fmt::format("pad {}, random crop {}x{}, flip, {} normalize", train.pad, d.height, d.width,
                                     norm.name)
                       : fmt::format("{} normalize, no augmentation", norm.name);
  return t;
}

// Images resized to `size`: RandomResizedCrop + flip for training, Resize + CenterCrop for
// evaluation (torchvision's ImageNet recipe), Normalize.
Transforms resized_transforms(int64_t size, int64_t resize_size, const Normalization& norm, bool augment) {
  Transforms t;
  data::ImageTransformOptions eval;
  eval.mode = data::ImageTransformMode::eval;
  eval.size = size;
  eval.resize_size = resize_size;
  eval.mean = norm.mean;
  eval.std = norm.std;
  data::ImageTransformOptions train = eval;
  train.mode = data::ImageTransformMode::train;
  t.eval = std::make_shared<data::ImageTransform>(eval);
  t.train = augment ? std::make_shared<data::ImageTransform>(train) : t.eval;
  t.describe = augment ? fmt::format("RandomResizedCrop {}, flip, {} normalize", size, norm.name)
                       : fmt::format("Resize {} + CenterCrop {}, {} normalize, no augmentation", resize_size, size,
                                     norm.name);
  return t;
}

}  // namespace

data::DatasetOptions dataset_options(const TrainConfig& cfg) {
  data::DatasetOptions o;
  o.format = data::parse_dataset_format(cfg.dataset);
  if (o.format == data::DatasetFormat::detect) o.format = data::detect_format(cfg.data_dir);
  o.label = data::parse_cifar_label(cfg.label);
  o.val_split = cfg.val_split;
  o.seed = cfg.seed;
  return o;
}

std::shared_ptr<const data::Dataset> open_split(const TrainConfig& cfg, data::Split split) {
  return data::open_dataset(cfg.data_dir, split, dataset_options(cfg));
}

std::shared_ptr<const data::Sampler> train_sampler(const data::FieldDataset& set, const TrainConfig& cfg) {
  if (cfg.shuffle == "full") return nullptr;
  TD_CHECK_ARG(set.block_size() > 0, "train", "--shuffle block: expected packed shards (tandem pack), got --data {}",
               cfg.data_dir);
  return std::make_shared<data::BlockShuffleSampler>(set.size(), set.block_size(), kBlockShuffleWindow, cfg.seed);
}

Transforms make_transforms(const data::Dataset& set, data::DatasetFormat format, const TrainConfig& cfg) {
  const data::ImageDims d = set.dims();
  Normalization norm = default_normalization(set, format);
  if (!cfg.mean.empty()) {
    TD_CHECK_ARG(cfg.mean.size() == 1 || static_cast<int64_t>(cfg.mean.size()) == (d.channels == 1 ? 1 : 3), "train",
                 "--mean: expected 1 or {} values for the {}-channel images of --data {}, got {}", d.channels,
                 d.channels, cfg.data_dir, cfg.mean.size());
    norm = {cfg.mean, cfg.std, "--mean/--std"};
  }
  const bool varying = d.height == 0 || d.width == 0;
  Transforms t;
  if (varying || (cfg.image_size != 0 && (cfg.image_size != d.height || cfg.image_size != d.width))) {
    TD_CHECK_ARG(d.channels == 1 || d.channels == 3, "train",
                 "--image-size {}: expected images of 1 or 3 channels to resize, --data {} holds {}", cfg.image_size,
                 cfg.data_dir, d.channels);
    if (d.channels == 1 && cfg.mean.empty()) norm = {{0.2860f}, {0.3530f}, "Fashion-MNIST"};
    const int64_t size = cfg.image_size ? cfg.image_size : kDefaultImageSize;
    const int64_t resize = cfg.resize_size ? cfg.resize_size : (size * 256 + 112) / 224;
    TD_CHECK_ARG(resize >= size, "train", "--resize-size {}: expected at least --image-size {}", resize, size);
    t = resized_transforms(size, resize, norm, cfg.augment);
  } else {
    t = raw_transforms(d, norm, cfg.augment);
  }
  t.mean = norm.mean;
  t.std = norm.std;
  return t;
}

}  // namespace tandem::train
