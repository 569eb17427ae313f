// `tandem pack SRC OUT`: writes both splits of any dataset open_dataset() can open into the
// packed format (include/tandem/data/packed.h).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "dataset_flags.h"
#include "tandem/data/image_codec.h"
#include "tandem/data/packed.h"
#include "tandem/error.h"

namespace tandem::tools {

namespace {
namespace fs = std::filesystem;

struct PackFlags {
  std::string src, out;
  uint64_t shard_size_mb = 256;
  bool no_check = false;
  DatasetFlags data;
};

// Forwards a dataset; get() decodes every encoded sample in full first, so that a corrupt or
// truncated image stops the pack naming its file instead of travelling into the shards.
class DecodeChecked final : public data::Dataset {
 public:
  explicit DecodeChecked(std::shared_ptr<const data::Dataset> d) : d_(std::move(d)) {}
  int64_t size() const override { return d_->size(); }
  data::ImageDims dims() const override { return d_->dims(); }
  int64_t num_classes() const override { return d_->num_classes(); }
  std::string class_name(int64_t label) const override { return d_->class_name(label); }
  data::Sample get(int64_t index, std::vector<uint8_t>& scratch) const override {
    const data::Sample s = d_->get(index, scratch);
    if (s.encoding != data::Encoding::raw) data::decode_image(s.pixels, s.size, s.source, data::ImageScale{}, rgb_);
    return s;
  }

 private:
  std::shared_ptr<const data::Dataset> d_;
  mutable std::vector<uint8_t> rgb_;  // write_packed reads samples from one thread
};
PackFlags& flags() {
  static PackFlags f;
  return f;
}
bool within(const fs::path& inner, const fs::path& outer) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

// Shards must not land where SRC is read from: SRC itself (its manifest would make SRC read as
// packed) or, for an image folder, inside its class folders (a class of .tpk files); a folder
// beside train/ and val/ is not read and may hold the pack.
void check_out_outside_src(const std::string& src_arg, const std::string& out_arg, data::DatasetFormat format) {
  std::error_code ec;
  const fs::path src = fs::weakly_canonical(src_arg, ec), out = fs::weakly_canonical(out_arg, ec);
  if (src.empty() || out.empty()) return;  // the dataset's own errors name what is missing
  TD_CHECK_ARG(src != out, "pack", "OUT {} is the same folder as SRC {}: expected a folder outside it", out_arg,
               src_arg);
  if (format != data::DatasetFormat::folder) return;
  std::vector<fs::path> read{src};
  if (fs::is_directory(src / "train", ec)) read = {src / "train", src / "val", src / "test"};
  for (const fs::path& r : read)
    TD_CHECK_ARG(!within(out, r), "pack", "OUT {} is inside SRC {}, in the class folders it reads: expected a "
                 "folder outside them", out_arg, src_arg);
}
}  // namespace

void add_pack_command(CLI::App& app) {
  PackFlags& f = flags();
  CLI::App* c = app.add_subcommand(
      "pack", "Write a dataset (an image folder with train/ and val/, or any --data folder) as packed shards");
  c->add_option("SRC", f.src, "Dataset folder")->required();
  c->add_option("OUT", f.out, "Output folder (created; its manifest.json and shards are replaced)")->required();
  c->add_option("--shard-size-mb", f.shard_size_mb, "MiB of records per shard")->capture_default_str();
  c->add_flag("--no-check", f.no_check,
              "Do not decode every image before packing it (faster; a corrupt file is then found only when read)");
  add_dataset_flags(c, f.data);
  strict_values(c);
}

int run_pack_command() {
  const PackFlags& f = flags();
  TD_CHECK_ARG(f.shard_size_mb >= 1 && f.shard_size_mb <= (uint64_t{1} << 20), "pack",
               "--shard-size-mb: expected 1..1048576, got {}", f.shard_size_mb);
  const data::DatasetOptions opt = f.data.options();
  const data::DatasetFormat format =
      opt.format == data::DatasetFormat::detect ? data::detect_format(f.src) : opt.format;
  check_out_outside_src(f.src, f.out, format);
  const auto t0 = std::chrono::steady_clock::now();
  const auto train = data::open_dataset(f.src, data::Split::train, opt);
  std::shared_ptr<const data::Dataset> test;
  try {
    test = data::open_dataset(f.src, data::Split::test, opt);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    fmt::print("note: packing the train split only: {}\n", e.what());  // a flat folder without --val-split
  }
  // Decode-checked views of both splits (kept alive here; write_packed borrows them).
  std::shared_ptr<const data::Dataset> train_in = train, test_in = test;
  if (!f.no_check) {
    train_in = std::make_shared<DecodeChecked>(train);
    if (test) test_in = std::make_shared<DecodeChecked>(test);
  }
  std::vector<data::PackSplit> splits{{"train", train_in.get()}};
  if (test) splits.push_back({"test", test_in.get()});
  const data::PackResult r = data::write_packed(splits, f.out, {f.shard_size_mb << 20});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("packed {} records (train {}{}) from {} ({}) into {} shard{} of {:.1f} MiB in all, {:.1f} s: {}\n",
             r.records, train->size(), test ? fmt::format(", test {}", test->size()) : "", f.src,
             data::format_name(format),
             r.shards, r.shards == 1 ? "" : "s", static_cast<double>(r.bytes) / (1 << 20), s, f.out);
  return 0;
}

}  // namespace tandem::tools
