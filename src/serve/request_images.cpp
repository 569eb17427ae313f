#include "tandem/serve/request_images.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tandem/data/image_codec.h"
#include "tandem/data/image_resample.h"
#include "tandem/serve/http_error.h"

namespace tandem::serve {

namespace {

[[noreturn]] void bad(const std::string& message) { throw HttpError(400, message); }

std::string dims_text(const data::ImageDims& d) { return fmt::format("{}x{}x{}", d.channels, d.height, d.width); }

bool fixed_size(const data::ImageDims& d) { return d.height > 0 && d.width > 0; }

// Interleaved RGB [h, w, 3] resized to [out_h, out_w, 3] (antialiased bilinear, rounded).
std::vector<uint8_t> resize_rgb(const std::vector<uint8_t>& rgb, int64_t w, int64_t h, int64_t out_w, int64_t out_h) {
  const data::RgbView view{rgb.data(), w, h, w * 3};
  const data::ResampleBox box{0.0, 0.0, static_cast<double>(w) / static_cast<double>(out_w),
                              static_cast<double>(h) / static_cast<double>(out_h)};
  std::vector<float> planes(static_cast<size_t>(3 * out_h * out_w)), work;
  data::resample_rgb_to_chw(view, box, out_h, out_w, false, data::ChannelAffine{}, planes.data(), work);
  std::vector<uint8_t> out(static_cast<size_t>(out_h * out_w * 3));
  const size_t plane = static_cast<size_t>(out_h * out_w);
  for (size_t c = 0; c < 3; ++c)
    for (size_t i = 0; i < plane; ++i)
      out[i * 3 + c] = static_cast<uint8_t>(std::lround(std::clamp(planes[c * plane + i], 0.0f, 255.0f)));
  return out;
}

// Interleaved RGB [h, w, 3] to planar [channels, h, w]; one channel is ITU-R 601-2 luma.
std::vector<uint8_t> to_planar(const std::vector<uint8_t>& rgb, int64_t w, int64_t h, int64_t channels) {
  const size_t n = static_cast<size_t>(w * h);
  std::vector<uint8_t> out(n * static_cast<size_t>(channels));
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = rgb[i * 3], g = rgb[i * 3 + 1], b = rgb[i * 3 + 2];
    if (channels == 1) {
      out[i] = static_cast<uint8_t>((r * 299 + g * 587 + b * 114) / 1000);
    } else {
      out[i] = static_cast<uint8_t>(r);
      out[n + i] = static_cast<uint8_t>(g);
      out[2 * n + i] = static_cast<uint8_t>(b);
    }
  }
  return out;
}

int json_depth(const nlohmann::json& j) {
  int d = 0;
  const nlohmann::json* p = &j;
  while (p->is_array() && !p->empty()) {
    ++d;
    p = &(*p)[0];
  }
  return d;
}

}  // namespace

RawImage image_from_bytes(const uint8_t* bytes, size_t size, const InputRules& rules, const std::string& what) {
  const data::ImageDims want = rules.card->sample_dims;
  if (data::sniff_encoding(bytes, size) == data::Encoding::raw)
    bad(fmt::format("{}: {} bytes that are not a PNG or JPEG image: expected PNG or JPEG bytes or a JSON array", what,
                    size));
  if (want.channels != 1 && want.channels != 3)
    bad(fmt::format("{}: the model takes {}-channel samples, which no PNG or JPEG holds: send a JSON array", what,
                    want.channels));
  // The size comes from the header, before any pixel memory: a few hundred KiB of PNG can
  // claim 12000x12000 pixels (432 MiB of RGB), which is refused here, not decoded.
  std::vector<uint8_t> rgb;
  data::ImageInfo info;
  try {
    info = data::read_image_info(bytes, size, what.c_str());
    const bool other_size = fixed_size(want) && (info.width != want.width || info.height != want.height);
    if (other_size && !rules.resize)
      bad(fmt::format("{} is {}x{} pixels, expected {}x{} (width x height) for the model; the server resizes "
                      "only with --resize",
                      what, info.width, info.height, want.width, want.height));
    if (static_cast<int64_t>(info.width) * info.height > kMaxRequestPixels)
      bad(fmt::format("{} is {}x{} pixels, more than the {} pixels a request image may have", what, info.width,
                      info.height, kMaxRequestPixels));
    info = data::decode_image(bytes, size, what.c_str(), data::ImageScale{}, rgb);
  } catch (const Error& e) {
    bad(e.what());
  }
  int64_t w = info.width, h = info.height;
  if (fixed_size(want) && (w != want.width || h != want.height)) {
    rgb = resize_rgb(rgb, w, h, want.width, want.height);
    w = want.width;
    h = want.height;
  }
  RawImage out;
  out.dims = {want.channels, h, w};
  out.pixels = to_planar(rgb, w, h, want.channels);
  return out;
}

bool json_holds_several(const nlohmann::json& j, const InputRules& rules) {
  (void)rules;
  return json_depth(j) == 4;
}

RawImage image_from_json(const nlohmann::json& j, const InputRules& rules, const std::string& what) {
  const data::ImageDims want = rules.card->sample_dims;
  const int depth = json_depth(j);
  if (!(depth == 3 || (depth == 2 && want.channels == 1)))
    bad(fmt::format("{}: expected a JSON array [C, H, W] of pixel values{} for samples {}, got an array of depth {}",
                    what, want.channels == 1 ? " (or [H, W])" : "", dims_text(want), depth));
  const nlohmann::json& planes = depth == 2 ? nlohmann::json::array({j}) : j;
  RawImage out;
  out.dims.channels = static_cast<int64_t>(planes.size());
  out.dims.height = static_cast<int64_t>(planes[0].size());
  out.dims.width = out.dims.height ? static_cast<int64_t>(planes[0][0].size()) : 0;
  const bool shape_ok = out.dims.channels == want.channels &&
                        (fixed_size(want) ? out.dims.height == want.height && out.dims.width == want.width
                                          : out.dims.height > 0 && out.dims.width > 0);
  if (!shape_ok)
    bad(fmt::format("{}: array of shape {} (first rows), expected {} ([C, H, W])", what, dims_text(out.dims),
                    dims_text(want)));
  out.pixels.reserve(static_cast<size_t>(out.dims.numel()));
  for (const nlohmann::json& plane : planes) {
    if (!plane.is_array() || static_cast<int64_t>(plane.size()) != out.dims.height)
      bad(fmt::format("{}: a channel of {} rows, expected {}", what, plane.is_array() ? plane.size() : 0,
                      out.dims.height));
    for (const nlohmann::json& row : plane) {
      if (!row.is_array() || static_cast<int64_t>(row.size()) != out.dims.width)
        bad(fmt::format("{}: a row of {} values, expected {}", what, row.is_array() ? row.size() : 0, out.dims.width));
      for (const nlohmann::json& v : row) {
        const bool ok = v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 255;
        if (!ok) bad(fmt::format("{}: pixel value {} is not an integer in 0..255", what, v.dump().substr(0, 32)));
        out.pixels.push_back(static_cast<uint8_t>(v.get<int64_t>()));
      }
    }
  }
  return out;
}

Tensor preprocess(const std::vector<RawImage>& images, const InputRules& rules) {
  const nn::ModelSpec& s = rules.card->spec;
  Tensor out = Tensor::empty({static_cast<int64_t>(images.size()), s.channels, s.height, s.width});
  const int64_t numel = s.channels * s.height * s.width;
  float* dst = out.data<float>();
  for (size_t i = 0; i < images.size(); ++i)
    rules.card->eval_transform->apply(images[i].pixels.data(), images[i].dims, dst + static_cast<int64_t>(i) * numel,
                                      data::SampleKey{});
  return out;
}

}  // namespace tandem::serve
