// tandem show-batch: one augmented training batch as a PNG grid, de-normalized, each image
// with its class name under it, so a user sees what the model sees.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "glyph_font.h"
#include "tandem/atomic_file.h"
#include "tandem/data/image_codec.h"
#include "tandem/data/loader.h"
#include "tandem/error.h"
#include "train/data_recipe.h"

namespace tandem::tools {

namespace {
struct ShowBatchFlags {
  std::string out;
  int64_t count = 32;
  int columns = 8;
  uint64_t epoch = 0;
  std::string split = "train";
};
ShowBatchFlags g_flags;
}  // namespace

void add_show_batch_command(CLI::App& app, train::TrainConfig& cfg) {
  CLI::App* c = app.add_subcommand(
      "show-batch", "Write one augmented batch as a PNG grid (de-normalized, class names under the images)");
  add_data_options(c, cfg, true);
  c->add_option("--out", g_flags.out, "PNG file to write")->required();
  c->add_option("--count", g_flags.count, "Images in the grid (the batch size)")->capture_default_str();
  c->add_option("--columns", g_flags.columns, "Images per row")->capture_default_str();
  c->add_option("--seed", cfg.seed, "Seed of the shuffle and augmentation, as for train")->capture_default_str();
  c->add_option("--epoch", g_flags.epoch, "Epoch (0-based) whose first batch is shown")->capture_default_str();
  c->add_option("--split", g_flags.split, "train (augmented, shuffled) or test (evaluation transform, in order)")
      ->capture_default_str();
  c->add_flag_callback("--no-augment", [&cfg] { cfg.augment = false; }, "Show the training set without augmentation");
}

// u8 of the de-normalized value v of channel c: (v * std + mean) * 255, rounded and clamped.
static uint8_t denormalize(float v, const std::vector<float>& mean, const std::vector<float>& std, int64_t c) {
  const size_t i = mean.size() == 1 ? 0 : static_cast<size_t>(c);
  const float x = (v * std[i] + mean[i]) * 255.0f;
  return static_cast<uint8_t>(std::clamp(std::lround(x), 0L, 255L));
}

int run_show_batch(const train::TrainConfig& cfg) {
  const ShowBatchFlags& f = g_flags;
  TD_CHECK_ARG(f.count >= 1 && f.count <= 4096, "show-batch", "--count: expected 1..4096 images, got {}", f.count);
  TD_CHECK_ARG(f.columns >= 1 && f.columns <= 256, "show-batch", "--columns: expected 1..256, got {}", f.columns);
  TD_CHECK_ARG(f.split == "train" || f.split == "test", "show-batch", "--split: expected train or test, got {}",
               f.split);
  train::validate(cfg, "show-batch");
  const bool training = f.split == "train";
  const auto set = train::open_split(cfg, training ? data::Split::train : data::Split::test);
  const train::Transforms tf = train::make_transforms(*set, train::dataset_options(cfg).format, cfg);
  data::LoaderOptions lo;
  lo.batch_size = f.count;
  lo.shuffle = training;
  lo.seed = cfg.seed;
  lo.skip_corrupt = cfg.skip_corrupt;
  data::Loader loader(set, training ? tf.train : tf.eval, lo);
  TD_CHECK(set->size() > 0, ErrorCode::invalid_argument, "show-batch", "--data {}: the {} split holds no samples",
           cfg.data_dir, f.split);
  // The grid's size is known before any image is loaded: refuse one PNG cannot hold.
  const Shape& shape = loader.fields()[static_cast<size_t>(loader.input_field())].shape;  // images [C, H, W]
  const data::ImageDims d{shape[0], shape[1], shape[2]};
  const int64_t n = std::min<int64_t>(f.count, set->size());
  const int cols = static_cast<int>(std::min<int64_t>(f.columns, n));
  const int rows = static_cast<int>((n + cols - 1) / cols);
  const int label_h = glyph_height() + 2, pad = 4;
  // Wide enough for the longest class name of the batch's set (up to 24 characters).
  int64_t name_chars = 4;
  for (int64_t c = 0; c < set->num_classes() && c < 1000; ++c)
    name_chars = std::max<int64_t>(name_chars, static_cast<int64_t>(set->class_name(c).size()));
  const int cell_w = static_cast<int>(std::max<int64_t>(d.width, std::min<int64_t>(name_chars, 24) * glyph_width())) + pad;
  const int cell_h = static_cast<int>(d.height) + label_h + pad;
  const int64_t grid_w = int64_t{cols} * cell_w + pad, grid_h = int64_t{rows} * cell_h + pad;
  TD_CHECK_ARG(grid_w <= 65535 && grid_h <= 65535, "show-batch",
               "a grid of {} images of {}x{} in {} columns is {}x{} pixels: expected at most 65535 per side (a PNG's "
               "limit here); lower --count, --columns or --image-size",
               n, d.width, d.height, cols, grid_w, grid_h);
  const int W = static_cast<int>(grid_w), H = static_cast<int>(grid_h);
  loader.begin_epoch(f.epoch);
  data::Batch batch;
  TD_CHECK(loader.next(batch) && batch.size() == n, ErrorCode::internal, "show-batch",
           "expected a first batch of {} images", n);
  std::vector<uint8_t> rgb(static_cast<size_t>(W) * H * 3, 255);
  const float* img = batch.input().data<float>();
  const int64_t* labels = batch.target().data<int64_t>();
  const int64_t plane = d.height * d.width;
  for (int64_t k = 0; k < n; ++k) {
    const int x0 = pad + static_cast<int>(k % cols) * cell_w, y0 = pad + static_cast<int>(k / cols) * cell_h;
    const float* s = img + k * d.numel();
    for (int64_t y = 0; y < d.height; ++y)
      for (int64_t x = 0; x < d.width; ++x) {
        uint8_t* p = rgb.data() + ((static_cast<int64_t>(y0) + y) * W + x0 + x) * 3;
        for (int64_t c = 0; c < 3; ++c) {
          const int64_t sc = d.channels == 1 ? 0 : c;  // grayscale: the same value in R, G and B
          p[c] = denormalize(s[sc * plane + y * d.width + x], tf.mean, tf.std, sc);
        }
      }
    draw_text(rgb.data(), W, H, x0, y0 + static_cast<int>(d.height) + 1, set->class_name(labels[k]),
              (cell_w - pad) / glyph_width(), 0, 0, 0);
  }
  const std::vector<uint8_t> png = data::encode_png(rgb.data(), W, H);
  AtomicFile file(f.out, "show-batch");
  file.write(png.data(), png.size());
  file.commit();
  fmt::print("wrote {}: {} images of {}x{} from the {} split, epoch {}, {}\n", f.out, n, d.width, d.height, f.split,
             f.epoch, training ? tf.describe : "evaluation transform");
  const std::vector<std::string> skipped = loader.skipped_samples();  // --skip-corrupt
  if (!skipped.empty()) fmt::print("  skipped {} corrupt sample{}:\n", skipped.size(), skipped.size() == 1 ? "" : "s");
  for (const std::string& m : skipped) fmt::print("    {}\n", m);
  return 0;
}

}  // namespace tandem::tools
