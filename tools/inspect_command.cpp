// `tandem inspect --data DIR`: the format, samples per class, image sizes and the decode rate.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "dataset_flags.h"
#include "tandem/data/image_codec.h"
#include "tandem/error.h"

namespace tandem::tools {

namespace {
struct InspectFlags {
  std::string data_dir;
  int64_t size_samples = 1000;
  int64_t decode_samples = 100;
  DatasetFlags data;
};
InspectFlags& flags() {
  static InspectFlags f;
  return f;
}

// `count` indices spread evenly over [0, n) (all of them when count is 0 or >= n).
std::vector<int64_t> spread(int64_t n, int64_t count) {
  if (count <= 0 || count >= n) count = n;
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out[static_cast<size_t>(k)] = k * n / count;
  return out;
}

std::string min_median_max(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return fmt::format("{} / {} / {}", v.front(), v[v.size() / 2], v.back());
}

void print_split(const char* name, const data::Dataset& d, const InspectFlags& f) {
  const data::ImageDims dims = d.dims();
  fmt::print("{}: {} samples, {} classes, dims [{}, {}, {}]{}\n", name, d.size(), d.num_classes(), dims.channels,
             dims.height, dims.width, dims.height == 0 ? " (sizes vary)" : "");
  std::vector<int64_t> counts(static_cast<size_t>(d.num_classes()), 0);
  for (int64_t i = 0; i < d.size(); ++i) ++counts[static_cast<size_t>(d.label(i))];
  for (int64_t c = 0; c < d.num_classes(); ++c)
    fmt::print("  {:>4}  {:<24} {}\n", c, d.class_name(c), counts[static_cast<size_t>(c)]);
  if (d.size() == 0) return;
  if (dims.height > 0 && dims.width > 0) {
    fmt::print("  images: raw u8 [{}, {}, {}], no decoding\n", dims.channels, dims.height, dims.width);
    return;
  }
  // A file that cannot be read or decoded is counted and named, and the survey goes on: finding
  // them is part of describing a dataset.
  std::vector<std::string> bad;
  auto attempt = [&bad](const auto& body) {
    try {
      body();
      return true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::io && e.code() != ErrorCode::format) throw;
      bad.push_back(e.what());
      return false;
    }
  };
  std::vector<uint8_t> scratch;
  const std::vector<int64_t> which = spread(d.size(), f.size_samples);
  std::vector<int> widths, heights;
  int64_t jpeg = 0;
  for (const int64_t i : which) {
    attempt([&] {
      const data::Sample s = d.get(i, scratch);
      const data::ImageInfo info = data::read_image_info(s.pixels, s.size, s.source);
      widths.push_back(info.width);
      heights.push_back(info.height);
      jpeg += info.encoding == data::Encoding::jpeg;
    });
  }
  const int64_t sized = static_cast<int64_t>(widths.size());
  if (sized > 0)
    fmt::print("  image size over {} (from the headers): width min/median/max {}, height {}; {} JPEG, {} PNG\n",
               sized == d.size() ? fmt::format("all {} samples", sized) : fmt::format("{} evenly spaced samples", sized),
               min_median_max(widths), min_median_max(heights), jpeg, sized - jpeg);
  const std::vector<int64_t> dec = spread(d.size(), std::max<int64_t>(f.decode_samples, 1));
  std::vector<uint8_t> rgb;
  double seconds = 0;
  int64_t pixels = 0, decoded = 0;
  for (const int64_t i : dec) {
    attempt([&] {
      const data::Sample s = d.get(i, scratch);  // reading is not timed
      const auto t0 = std::chrono::steady_clock::now();
      const data::ImageInfo info = data::decode_image(s.pixels, s.size, s.source, {1, 1}, rgb);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      pixels += int64_t{info.width} * info.height;
      ++decoded;
    });
  }
  if (decoded > 0)
    fmt::print("  decode: {} images in {:.3f} s: {:.0f} images/s, {:.1f} Mpixel/s (decode_image to RGB at full size, "
               "1 thread, file reads not timed)\n",
               decoded, seconds, static_cast<double>(decoded) / std::max(seconds, 1e-9),
               static_cast<double>(pixels) / 1e6 / std::max(seconds, 1e-9));
  std::sort(bad.begin(), bad.end());
  bad.erase(std::unique(bad.begin(), bad.end()), bad.end());
  if (!bad.empty()) fmt::print("  unreadable or corrupt: {} of the sampled files:\n", bad.size());
  for (const std::string& m : bad) fmt::print("    {}\n", m);
}
}  // namespace

void add_inspect_command(CLI::App& app) {
  InspectFlags& f = flags();
  CLI::App* c = app.add_subcommand("inspect", "Describe a dataset: format, samples per class, image sizes, decode rate");
  c->add_option("--data", f.data_dir, "Dataset folder")->required();
  c->add_option("--size-samples", f.size_samples,
                "Encoded images whose headers are read for the size statistics, evenly spaced (0 = all)")
      ->capture_default_str();
  c->add_option("--decode-samples", f.decode_samples, "Encoded images decoded to measure the decode rate")
      ->capture_default_str();
  add_dataset_flags(c, f.data);
  strict_values(c);
}

int run_inspect_command() {
  const InspectFlags& f = flags();
  TD_CHECK_ARG(f.size_samples >= 0 && f.decode_samples >= 1, "inspect",
               "expected --size-samples >= 0 and --decode-samples >= 1, got {} and {}", f.size_samples,
               f.decode_samples);
  const data::DatasetOptions opt = f.data.options();
  const data::DatasetFormat format = opt.format == data::DatasetFormat::detect ? data::detect_format(f.data_dir) : opt.format;
  fmt::print("{}: format {}{}\n", f.data_dir, data::format_name(format),
             opt.format == data::DatasetFormat::detect ? " (detected)" : "");
  print_split("train", *data::open_dataset(f.data_dir, data::Split::train, opt), f);
  try {
    print_split("test", *data::open_dataset(f.data_dir, data::Split::test, opt), f);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    fmt::print("test: none ({})\n", e.what());
  }
  return 0;
}

}  // namespace tandem::tools
