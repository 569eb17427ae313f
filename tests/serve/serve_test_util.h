// Shared pieces of the serving tests: a model card for Fashion-MNIST-shaped synthetic data,
// weights of a seeded model as a published snapshot, the reference answer (the model run
// in-process through the same evaluation transform, softmax in double), a server on a free
// loopback port, and request bodies (PNG bytes, JSON pixel arrays).
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tandem/data/image_codec.h"
#include "tandem/data/synthetic_dataset.h"
#include "tandem/nn/models.h"
#include "tandem/serve/server.h"
#include "tandem/train/model_card.h"
#include "tandem/train/trainer.h"

namespace tandem::testing {

/// The card of `model` on 1x28x28 synthetic samples (Fashion-MNIST normalize), and the set.
/// A TCP connection to 127.0.0.1:port (EXPECTs that it connected).
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

/// Everything the server sends on `fd` until it closes the connection or 30 s pass without a
/// byte (then *last is the failed recv's -1; 0 when the server closed). Closes `fd`.
inline std::string read_until_closed(int fd, ssize_t* last = nullptr) {
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (last) *last = n;
  return got;
}

inline const data::SyntheticDataset& synthetic_set() {
  static const data::SyntheticDataset set(64, 7);
  return set;
}

inline train::ModelCard synthetic_card(const std::string& model = "mlp") {
  train::TrainConfig cfg;
  cfg.model = model;
  return train::make_model_card(synthetic_set(), data::DatasetFormat::detect, cfg);
}

/// A copy of the state of `model` built for the card with `seed`, as a snapshot of `version`.
inline std::shared_ptr<serve::ServedWeights> seeded_weights(const train::ModelCard& card, uint64_t seed, int64_t version) {
  nn::ModulePtr m = nn::make_model(card.model, card.spec, seed);
  NamedTensors t;
  for (const nn::NamedTensor& n : m->state_dict()) t.emplace_back(n.name, n.tensor.clone());
  auto w = std::make_shared<serve::ServedWeights>();
  w->version = version;
  w->weights = serve::host_weights(std::move(t));
  return w;
}

/// Sample `i` of the synthetic set: u8 [1, 28, 28].
inline std::vector<uint8_t> sample_pixels(int64_t i) {
  std::vector<uint8_t> scratch;
  const data::Sample s = synthetic_set().get(i, scratch);
  return std::vector<uint8_t>(s.pixels, s.pixels + 784);
}

/// What the served model must answer for `pixels`: the model with the snapshot's weights,
/// in eval mode, on the evaluation transform's output; softmax in double.
inline std::vector<double> reference_probs(const train::ModelCard& card, const serve::ServedWeights& w,
                                           const std::vector<uint8_t>& pixels) {
  nn::ModulePtr m = nn::make_model(card.model, card.spec, 99);
  train::load_state(*m, w.weights->tensors(), "test");
  m->eval();
  Tensor x = Tensor::empty({1, card.spec.channels, card.spec.height, card.spec.width});
  card.eval_transform->apply(pixels.data(), card.sample_dims, x.data<float>(), data::SampleKey{});
  const Tensor logits = m->forward(x);
  const float* l = logits.data<float>();
  const int64_t k = card.spec.num_classes;
  double mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < k; ++j) mx = std::max(mx, static_cast<double>(l[j]));
  std::vector<double> p(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(static_cast<double>(l[j]) - mx));
  for (double& v : p) v /= sum;
  return p;
}

inline size_t argmax(const std::vector<double>& p) {
  return static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
}

/// A gray image u8 [h, w] as PNG bytes (RGB with the value in each channel).
inline std::string gray_png(const std::vector<uint8_t>& gray, int w, int h) {
  std::vector<uint8_t> rgb(gray.size() * 3);
  for (size_t i = 0; i < gray.size(); ++i) rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = gray[i];
  const std::vector<uint8_t> png = data::encode_png(rgb.data(), w, h);
  return std::string(png.begin(), png.end());
}

/// u8 [1, h, w] as the JSON array [1, H, W].
inline nlohmann::json pixels_json(const std::vector<uint8_t>& gray, int w, int h) {
  nlohmann::json plane = nlohmann::json::array();
  for (int y = 0; y < h; ++y) {
    nlohmann::json row = nlohmann::json::array();
    for (int x = 0; x < w; ++x) row.push_back(gray[static_cast<size_t>(y * w + x)]);
    plane.push_back(row);
  }
  return nlohmann::json::array({plane});
}

/// A started server on a free loopback port (options.listen is replaced).
inline std::unique_ptr<serve::InferenceServer> start_server(train::ModelCard card, serve::ServeOptions o = {},
                                                            std::shared_ptr<serve::OnlineBuffer> online = nullptr,
                                                            double mix = 0) {
  o.listen = "127.0.0.1:0";
  auto s = std::make_unique<serve::InferenceServer>(std::move(card), o, std::move(online), mix);
  s->start();
  return s;
}

inline std::unique_ptr<httplib::Client> client_of(const serve::InferenceServer& s) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", s.port());
  c->set_read_timeout(std::chrono::seconds(60));
  c->set_connection_timeout(std::chrono::seconds(10));
  c->set_tcp_nodelay(true);
  return c;
}

/// An error answer: one line of JSON {"error":{"status":S,"message":...}} with S == status.
inline void expect_json_error(const httplib::Result& r, int status, const std::string& needle = "") {
  ASSERT_TRUE(r) << "no answer, expected " << status;
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_EQ(r->body.find('\n'), std::string::npos) << r->body;
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r->body;
  EXPECT_EQ(j["error"]["status"], status) << r->body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r->body;
}

}  // namespace tandem::testing
