#include "dataset_flags.h"

namespace tandem::tools {

data::DatasetOptions DatasetFlags::options() const {
  data::DatasetOptions o;
  o.format = data::parse_dataset_format(format);
  o.label = data::parse_cifar_label(label);
  o.val_split = val_split;
  o.seed = seed;
  o.verify_crc = !no_verify;
  return o;
}

void add_dataset_flags(CLI::App* c, DatasetFlags& flags) {
  // --dataset as in train and show-batch; --format kept as another name.
  c->add_option("--dataset,--format", flags.format,
                "Dataset format: auto (judged by the folder's contents), fashion-mnist, cifar10, cifar100, folder "
                "or packed")
      ->capture_default_str();
  c->add_option("--label", flags.label, "CIFAR-100 labels: fine (100 classes) or coarse (20)")->capture_default_str();
  c->add_option("--val-split", flags.val_split,
                "Image folder without train/ and val/: the fraction of each class held out as the test split")
      ->capture_default_str();
  c->add_option("--seed", flags.seed, "Image folder with --val-split: which files are held out")->capture_default_str();
  c->add_flag("--no-verify", flags.no_verify, "Packed datasets: skip the per-record CRC32 check");
}

}  // namespace tandem::tools
