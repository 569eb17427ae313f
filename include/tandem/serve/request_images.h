// Request images: turning what a client sends into the model's input, exactly as
// `tandem eval` preprocesses a test sample. A request's image is
//   - PNG or JPEG bytes (data/image_codec.h: decoded to RGB; for a 1-channel model converted
//     to gray with ITU-R 601-2 luma, L = R * 299/1000 + G * 587/1000 + B * 114/1000 rounded
//     down, as Pillow's convert("L"), which keeps a gray image's values), or
//   - a JSON array of pixel values 0..255 (integers) of the dataset's raw sample shape
//     [C, H, W] ([H, W] also for C = 1);
// then the evaluation transform of the run (train/data_recipe.h via ModelCard) writes f32
// [C', H', W']. An image whose size is not the dataset's is a 400, unless `resize` is set:
// then it is resized to the dataset's H x W first (antialiased bilinear, image_resample.h).
// A dataset of varying sizes (an image folder) takes any size (its transform resizes).
// Errors: HttpError 400 with a message naming the image ("image 2: ...") and what was
// expected; the decoder's message for an undecodable or truncated file.
// Thread-safety: reentrant (HTTP handler threads call these concurrently).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/data/dataset.h"
#include "tandem/tensor.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

/// One raw sample u8 [C, H, W].
struct RawImage {
  std::vector<uint8_t> pixels;
  data::ImageDims dims;
};

struct InputRules {
  const train::ModelCard* card = nullptr;
  bool resize = false;  // --resize: images of another size are resized instead of refused
};

/// The most pixels a request image may have (4096 x 4096, 48 MiB of RGB once decoded), so that
/// a small compressed body cannot make the server decode hundreds of MiB (with --resize; without
/// it an image of another size than the model's is refused from its header alone).
inline constexpr int64_t kMaxRequestPixels = int64_t{4096} * 4096;
/// Most images (parts) of a multipart /v1/predict request; more: HttpError 400.
inline constexpr int64_t kMaxRequestParts = 1024;

/// Decodes PNG or JPEG bytes into a raw sample of the card's channels and size. `what` names
/// the image in errors ("image 0"). The size is checked from the header before decoding:
/// HttpError 400 for another size than the model's (without `resize`) or over kMaxRequestPixels.
RawImage image_from_bytes(const uint8_t* bytes, size_t size, const InputRules& rules, const std::string& what);

/// A JSON array [C, H, W] (or [H, W] for C = 1) of integers 0..255 as a raw sample.
RawImage image_from_json(const nlohmann::json& j, const InputRules& rules, const std::string& what);

/// True when `j` holds several images (a list of [C, H, W] / [H, W] arrays), false for one.
bool json_holds_several(const nlohmann::json& j, const InputRules& rules);

/// The model's inputs f32 [N, C', H', W'] for `images` (the evaluation transform).
Tensor preprocess(const std::vector<RawImage>& images, const InputRules& rules);

}  // namespace tandem::serve
