// /v1/predict answers what the model computes in-process on the evaluation transform's
// output, for every way of sending images (PNG, JSON one or several, multipart), with the
// top-k in order; /v1/model, /healthz and /readyz say what they should.
#include <gtest/gtest.h>

#include "serve/serve_test_util.h"
#include "tandem/serve/request_images.h"
#include "tandem/data/image_resample.h"
#include "tandem/rng.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

// The answer for one image against the reference: class, probabilities of the top-k.
void expect_answer(const json& a, const std::vector<double>& ref, int64_t top_k) {
  std::vector<size_t> order(ref.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ref[x] > ref[y]; });
  EXPECT_EQ(a["class"].get<size_t>(), argmax(ref));
  ASSERT_EQ(a["top_k"].size(), static_cast<size_t>(top_k));
  for (int64_t r = 0; r < top_k; ++r) {
    const json& t = a["top_k"][static_cast<size_t>(r)];
    EXPECT_EQ(t["class"].get<size_t>(), order[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_NEAR(t["probability"].get<double>(), ref[order[static_cast<size_t>(r)]], 2e-6) << "rank " << r;
  }
}

TEST(ServePredict, EveryEncodingAnswersWhatTheModelComputes) {
  for (const char* model : {"mlp", "fmnist-cnn"}) {
    SCOPED_TRACE(model);
    const train::ModelCard card = synthetic_card(model);
    auto server = start_server(card);
    const auto w = seeded_weights(card, 5, 12);
    server->publish(w);
    auto cli = client_of(*server);
    // One PNG.
    for (int64_t i = 0; i < 4; ++i) {
      const std::vector<uint8_t> px = sample_pixels(i);
      auto r = cli->Post("/v1/predict?top_k=3", gray_png(px, 28, 28), "image/png");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const json j = json::parse(r->body);
      EXPECT_EQ(j["version"], 12);
      EXPECT_EQ(j["model"], model);
      ASSERT_EQ(j["predictions"].size(), 1u);
      expect_answer(j["predictions"][0], reference_probs(card, *w, px), 3);
    }
    // Several as JSON [N, 1, 28, 28], in order.
    json several = json::array();
    for (int64_t i = 0; i < 6; ++i) several.push_back(pixels_json(sample_pixels(i), 28, 28));
    auto r = cli->Post("/v1/predict", several.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    ASSERT_EQ(j["predictions"].size(), 6u);
    for (int64_t i = 0; i < 6; ++i)
      expect_answer(j["predictions"][static_cast<size_t>(i)], reference_probs(card, *w, sample_pixels(i)), 5);
    // One JSON [H, W] array, and multipart with one PNG per part.
    r = cli->Post("/v1/predict?top_k=10", json(pixels_json(sample_pixels(9), 28, 28)[0]).dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    expect_answer(json::parse(r->body)["predictions"][0], reference_probs(card, *w, sample_pixels(9)), 10);
    httplib::MultipartFormDataItems items;
    for (int64_t i = 0; i < 3; ++i)
      items.push_back({"image" + std::to_string(i), gray_png(sample_pixels(20 + i), 28, 28), "x.png", "image/png"});
    r = cli->Post("/v1/predict", items);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    j = json::parse(r->body);
    ASSERT_EQ(j["predictions"].size(), 3u);
    for (int64_t i = 0; i < 3; ++i)
      expect_answer(j["predictions"][static_cast<size_t>(i)], reference_probs(card, *w, sample_pixels(20 + i)), 5);
  }
}

TEST(ServePredict, ResizeFlagResizesOtherSizesToTheModelsInput) {
  const train::ModelCard card = synthetic_card();
  serve::ServeOptions o;
  o.resize = true;
  auto server = start_server(card, o);
  const auto w = seeded_weights(card, 3, 1);
  server->publish(w);
  // A 56x56 image is resized to 28x28 by the antialiased bilinear filter (image_resample.h),
  // rounded to u8 levels, then goes through the evaluation transform.
  std::vector<uint8_t> big(56 * 56), rgb(56 * 56 * 3);
  Philox rng(4, 0);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(rng.randint(256));
  for (size_t i = 0; i < big.size(); ++i) rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = big[i];
  std::vector<float> planes(3 * 28 * 28), work;
  data::resample_rgb_to_chw({rgb.data(), 56, 56, 56 * 3}, {0, 0, 2.0, 2.0}, 28, 28, false, data::ChannelAffine{},
                            planes.data(), work);
  std::vector<uint8_t> px(28 * 28);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(std::lround(std::clamp(planes[i], 0.0f, 255.0f)));
  auto r = client_of(*server)->Post("/v1/predict", gray_png(big, 56, 56), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  expect_answer(json::parse(r->body)["predictions"][0], reference_probs(card, *w, px), 5);
}

// A request of more images than --max-batch is run as chunks of at most max-batch images,
// answered together and in order with what each image gets alone; the batch-size histogram
// shows that no batch the model ran held more.
TEST(ServePredict, RequestOverMaxBatchRunsInChunksOfAtMostMaxBatch) {
  const train::ModelCard card = synthetic_card("fmnist-cnn");
  serve::ServeOptions o;
  o.batcher.max_batch = 4;  // a bucket bound of the batch-size histogram
  auto server = start_server(card, o);
  const auto w = seeded_weights(card, 8, 3);
  server->publish(w);
  auto cli = client_of(*server);
  constexpr int64_t kImages = 3 * 4 + 1;
  json several = json::array();
  for (int64_t i = 0; i < kImages; ++i) several.push_back(pixels_json(sample_pixels(i), 28, 28));
  auto r = cli->Post("/v1/predict?top_k=10", several.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json all = json::parse(r->body);
  ASSERT_EQ(all["predictions"].size(), static_cast<size_t>(kImages));
  for (int64_t i = 0; i < kImages; ++i) {
    SCOPED_TRACE(i);
    auto one = cli->Post("/v1/predict?top_k=10", several[static_cast<size_t>(i)].dump(), "application/json");
    ASSERT_TRUE(one);
    ASSERT_EQ(one->status, 200) << one->body;
    const json& a = all["predictions"][static_cast<size_t>(i)];
    const json alone = json::parse(one->body);
    const json& b = alone["predictions"][0];
    EXPECT_EQ(a["class"], b["class"]);
    for (size_t k = 0; k < 10; ++k) {
      EXPECT_EQ(a["top_k"][k]["class"], b["top_k"][k]["class"]) << "rank " << k;
      EXPECT_NEAR(a["top_k"][k]["probability"].get<double>(), b["top_k"][k]["probability"].get<double>(), 1e-6);
    }
    expect_answer(a, reference_probs(card, *w, sample_pixels(i)), 10);
  }
  // Batches: 4 + 4 + 4 + 1 for the large request, then one per single image.
  const std::string text = server->metrics().render();
  auto value_of = [&](const std::string& series) {
    const size_t at = text.find(series + " ");
    EXPECT_NE(at, std::string::npos) << series << " in\n" << text;
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + series.size() + 1));
  };
  EXPECT_EQ(value_of("tandem_serve_batch_size_count"), 4 + kImages);
  EXPECT_EQ(value_of("tandem_serve_batch_size_bucket{le=\"4\"}"), 4 + kImages) << "a batch held more than 4 images";
  EXPECT_EQ(value_of("tandem_serve_batch_size_bucket{le=\"2\"}"), 1 + kImages);
}

// Multipart answers follow the parts' order in the body, whatever their names (httplib's
// parsed form sorts them by name: image10 before image2), and a request of more parts than
// kMaxRequestParts is a 400 that says so; the server then keeps serving.
TEST(ServePredict, MultipartAnswersFollowThePartsOrder) {
  const train::ModelCard card = synthetic_card("mlp");
  serve::ServeOptions o;
  o.batcher.max_batch = 4;
  auto server = start_server(card, o);
  const auto w = seeded_weights(card, 4, 1);
  server->publish(w);
  auto cli = client_of(*server);
  const std::vector<std::string> names = {"image2", "image10", "image1", "b", "a", "image2"};
  httplib::MultipartFormDataItems items;
  for (size_t i = 0; i < names.size(); ++i)
    items.push_back({names[i], gray_png(sample_pixels(30 + static_cast<int64_t>(i)), 28, 28), "x.png", "image/png"});
  auto r = cli->Post("/v1/predict?top_k=10", items);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  ASSERT_EQ(j["predictions"].size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    expect_answer(j["predictions"][i], reference_probs(card, *w, sample_pixels(30 + static_cast<int64_t>(i))), 10);
  }
  httplib::MultipartFormDataItems many(static_cast<size_t>(serve::kMaxRequestParts) + 1,
                                       {"f", gray_png(sample_pixels(0), 28, 28), "x.png", "image/png"});
  expect_json_error(cli->Post("/v1/predict", many), 400, "parts");
  r = cli->Post("/v1/predict", gray_png(sample_pixels(1), 28, 28), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(ServePredict, ModelHealthAndReadiness) {
  const train::ModelCard card = synthetic_card("fmnist-cnn");
  auto server = start_server(card);
  auto cli = client_of(*server);
  auto r = cli->Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  expect_json_error(cli->Get("/readyz"), 503, "no weights");
  expect_json_error(cli->Post("/v1/predict", gray_png(sample_pixels(0), 28, 28), "image/png"), 503, "no weights");
  auto w = seeded_weights(card, 1, 40);
  w->test_accuracy = 0.875;
  server->publish(w);
  r = cli->Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = cli->Get("/v1/model");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["model"], "fmnist-cnn");
  EXPECT_EQ(j["input_shape"], json::array({1, 28, 28}));
  EXPECT_EQ(j["num_classes"], 10);
  EXPECT_EQ(j["classes"].size(), 10u);
  EXPECT_EQ(j["version"], 40);
  EXPECT_DOUBLE_EQ(j["test_accuracy"].get<double>(), 0.875);
  EXPECT_TRUE(j["online"].is_null());
  // Versions do not go back.
  EXPECT_THROW(server->publish(seeded_weights(card, 1, 39)), Error);
}

}  // namespace
}  // namespace tandem::testing
