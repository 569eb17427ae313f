// The data side of a run, from its TrainConfig: which dataset a --data folder holds (opened
// through data::open_dataset with the --dataset, --label, --val-split and --seed flags) and
// the transforms each split gets:
//   image folders and packed shards (encoded JPEG/PNG, sizes vary): RandomResizedCrop to
//     --image-size (224) + flip for training, Resize(--resize-size, 256 for 224) + CenterCrop
//     for evaluation, Normalize with ImageNet's mean and std (data/image_transform.h);
//   CIFAR-10/100 (3x32x32): pad 4, random crop 32, flip, Normalize with the set's published
//     mean and std; Fashion-MNIST (1x28x28): pad 2, crop 28, flip, mean 0.2860, std 0.3530
//     (data/fused_image_transform.h); --image-size other than the set's own resizes them
//     through the image transform instead;
//   --no-augment: the evaluation transform for training too; --mean/--std replace the defaults.
// Thread-safety: reentrant.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/data/dataset.h"
#include "tandem/data/open_dataset.h"
#include "tandem/data/field_dataset.h"
#include "tandem/data/sampler.h"
#include "tandem/data/transform.h"
#include "tandem/train/config.h"

namespace tandem::train {

/// Side of the images cut from image folders when --image-size is 0 (torchvision's ImageNet recipe).
inline constexpr int64_t kDefaultImageSize = 224;
/// --shuffle block: the shuffle window of the page-aware sampler, in records (see
/// block_shuffle_sampler.h: about 1 neighbouring pair in 2 * window / block_size from one block).
inline constexpr int64_t kBlockShuffleWindow = 4096;

/// The dataset options the flags say, the format detected from --data's content for auto.
/// Throws as data::detect_format() and the name parsers do.
data::DatasetOptions dataset_options(const TrainConfig& cfg);

/// Opens split `split` of cfg.data_dir as the data flags say. Errors as data::open_dataset's.
std::shared_ptr<const data::Dataset> open_split(const TrainConfig& cfg, data::Split split);

/// The training sampler: null (the loader's RandomSampler, a full shuffle) for --shuffle full;
/// data::BlockShuffleSampler with the shards' block size for --shuffle block, which needs a
/// set with storage blocks (FieldDataset::block_size: packed shards; else Error(invalid_argument)
/// naming the flag).
std::shared_ptr<const data::Sampler> train_sampler(const data::FieldDataset& set, const TrainConfig& cfg);

struct Transforms {
  std::shared_ptr<const data::Transform> train, eval;
  std::vector<float> mean, std;  // the Normalize they apply, one value or one per channel
  std::string describe;          // e.g. "RandomResizedCrop 224, flip, ImageNet normalize"
};

/// The transforms for a run on `set` (the training set; the test set has the same format) in
/// `format` (detect = a dataset given in memory: judged by its shape). Throws
/// Error(invalid_argument) naming the flag when --mean/--std do not match the set's channels
/// or --image-size cannot apply.
Transforms make_transforms(const data::Dataset& set, data::DatasetFormat format, const TrainConfig& cfg);

}  // namespace tandem::train
