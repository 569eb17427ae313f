#include "train/data_recipe.h"

#include <fmt/format.h>

#include "tandem/data/fused_image_transform.h"
#include "tandem/error.h"

namespace tandem::train {

namespace {

struct Normalization {
  std::vector<float> mean, std;
  const char* name;
};

// Published per-channel statistics of each set's training images (pixels in [0, 1]).
Normalization default_normalization(const data::Dataset& set) {
  const data::ImageDims d = set.dims();
  if (d.channels == 1) return {{0.2860f}, {0.3530f}, "Fashion-MNIST"};
  if (d.height == 0) return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, "ImageNet"};
  if (set.num_classes() == 100 || set.num_classes() == 20)
    return {{0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}, "CIFAR-100"};
  return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}, "CIFAR-10"};
}

}  // namespace

std::shared_ptr<const data::Dataset> open_split(const TrainConfig& cfg, data::Split split) {
  return data::open_dataset(cfg.data_dir, split);
}

Transforms make_transforms(const data::Dataset& set, const TrainConfig& cfg) {
  const data::ImageDims d = set.dims();
  Normalization norm = default_normalization(set);
  if (!cfg.mean.empty()) {
    TD_CHECK_ARG(cfg.mean.size() == 1 || static_cast<int64_t>(cfg.mean.size()) == d.channels, "train",
                 "--mean: expected 1 or {} values for the {}-channel images of --data {}, got {}", d.channels,
                 d.channels, cfg.data_dir, cfg.mean.size());
    norm = {cfg.mean, cfg.std, "--mean/--std"};
  }
  Transforms t;
  t.mean = norm.mean;
  t.std = norm.std;
  // Raw images of one size: the pad + random crop + flip recipe at the set's own size (pad 2
  // for 28x28 as in the Fashion-MNIST recipe, pad 4 for 32x32 as in the CIFAR one).
  data::FusedImageTransformOptions eval;
  eval.mean = norm.mean;
  eval.std = norm.std;
  data::FusedImageTransformOptions train = eval;
  train.pad = d.height >= 32 ? d.height / 8 : 2;
  train.flip_p = 0.5f;
  TD_CHECK_ARG(d.height > 0 && (cfg.image_size == 0 || cfg.image_size == d.height), "train",
               "--image-size {}: the {}x{} images of --data {} are used at their own size; expected 0 or {}",
               cfg.image_size, d.height, d.width, cfg.data_dir, d.height);
  t.eval = std::make_shared<data::FusedImageTransform>(eval);
  t.train = cfg.augment ? std::make_shared<data::FusedImageTransform>(train) : t.eval;
  t.describe = cfg.augment ? fmt::format("pad {}, random crop {}x{}, flip, {} normalize", train.pad, d.height,
                                         d.width, norm.name)
                           : fmt::format("{} normalize, no augmentation", norm.name);
  return t;
}

}  // namespace tandem::train
