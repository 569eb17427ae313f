// The data flags that train, eval, show-batch and inspect share.
#include "commands.h"

namespace tandem::tools {

void add_data_options(CLI::App* c, train::TrainConfig& cfg, bool with_transforms) {
  c->add_option("--data", cfg.data_dir,
                "Dataset folder: Fashion-MNIST IDX files, CIFAR-10/100 binary files, an image folder (one "
                "subfolder of JPEG/PNG files per class, in train/ and val/ or split by --val-split) or packed "
                "shards (tandem pack); told apart by content")
      ->capture_default_str();
  c->add_option("--dataset", cfg.dataset,
                "Force the format: auto, fashion-mnist, cifar10, cifar100, folder or packed")
      ->capture_default_str();
  c->add_option("--label", cfg.label, "CIFAR-100 labels: fine (100 classes) or coarse (20)")->capture_default_str();
  c->add_option("--val-split", cfg.val_split,
                "Image folder without train/ and val/: the fraction of each class held out for testing, chosen "
                "by --seed (0 = the folder must have train/ and val/)")
      ->capture_default_str();
  c->add_flag("--skip-corrupt", cfg.skip_corrupt,
              "Replace an undecodable or unreadable image by the next good sample (deterministically) and list "
              "the skipped files at the end of each epoch, instead of stopping");
  if (!with_transforms) return;
  c->add_option("--shuffle", cfg.shuffle,
                "Training order: full (a uniform shuffle each epoch) or block (packed shards: blocks of "
                "consecutive records shuffled, then a 4096-record shuffle window, so reads stay page-local)")
      ->capture_default_str();
  c->add_option("--image-size", cfg.image_size,
                "Side of the square images the model sees: RandomResizedCrop for training and Resize + "
                "CenterCrop for evaluation; 0 = the dataset's own size (image folders, whose sizes vary: 224)")
      ->capture_default_str();
  c->add_option("--resize-size", cfg.resize_size,
                "Evaluation on image folders: the shorter side is resized to this before the center crop "
                "(0 = image size * 256 / 224, torchvision's recipe)")
      ->capture_default_str();
  c->add_option("--mean", cfg.mean, "Normalize: per-channel mean of pixels in [0, 1], e.g. 0.485,0.456,0.406 "
                                    "(default: the dataset's; ImageNet's for image folders)")
      ->delimiter(',');
  c->add_option("--std", cfg.std, "Normalize: per-channel standard deviation, as many values as --mean")
      ->delimiter(',');
}

}  // namespace tandem::tools
