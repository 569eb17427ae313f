// Every bad request gets its status and a one-line JSON error, and the server keeps
// answering: undecodable and truncated images, wrong shapes, bad JSON and parameters (400),
// missing and wrong tokens (401), unknown paths (404), wrong methods (405), bodies over
// --max-body-mb (413), clients that stall (cut off after --timeout-s), malformed samples
// (rejected without touching the buffer).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "serve/serve_test_util.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

class BadRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    card_ = synthetic_card("mlp");
    serve::ServeOptions o;
    o.max_body_mb = 1;
    o.timeout_s = 1;
    token_ = std::filesystem::temp_directory_path() / ("tandem_serve_token_" + std::to_string(::getpid()));
    std::ofstream(token_) << "s3cret\n";
    o.token_file = token_.string();
    online_ = std::make_shared<serve::OnlineBuffer>(16, 784, 10, 0);
    server_ = start_server(card_, o, online_, 0.25);
    server_->publish(seeded_weights(card_, 2, 7));
    cli_ = client_of(*server_);
    cli_->set_bearer_token_auth("s3cret");
  }
  void TearDown() override { std::filesystem::remove(token_); }
  // The server still answers a good request.
  void expect_alive() {
    auto r = cli_->Post("/v1/predict", gray_png(sample_pixels(1), 28, 28), "image/png");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  train::ModelCard card_;
  std::filesystem::path token_;
  std::shared_ptr<serve::OnlineBuffer> online_;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<httplib::Client> cli_;
};

TEST_F(BadRequests, ImagesAndParametersAnswer400) {
  const std::string png = gray_png(sample_pixels(0), 28, 28);
  expect_json_error(cli_->Post("/v1/predict", "hello", "application/octet-stream"), 400, "not a PNG or JPEG");
  expect_json_error(cli_->Post("/v1/predict", png.substr(0, png.size() / 2), "image/png"), 400, "image 0");
  std::vector<uint8_t> rgb(20 * 20 * 3, 9);
  const std::vector<uint8_t> jpeg = data::encode_jpeg(rgb.data(), 20, 20, 90);
  const std::string jpeg_s(jpeg.begin(), jpeg.end());
  expect_json_error(cli_->Post("/v1/predict", jpeg_s.substr(0, jpeg_s.size() - 40), "image/jpeg"), 400, "image 0");
  expect_json_error(cli_->Post("/v1/predict", jpeg_s, "image/jpeg"), 400, "20x20 pixels, expected 28x28");
  expect_json_error(cli_->Post("/v1/predict", pixels_json(std::vector<uint8_t>(27 * 28), 28, 27).dump(),
                               "application/json"),
                    400, "expected 1x28x28");
  expect_json_error(cli_->Post("/v1/predict", "[[[1,2", "application/json"), 400, "not valid JSON");
  json bad_value = pixels_json(sample_pixels(0), 28, 28);
  bad_value[0][3][4] = 256;
  expect_json_error(cli_->Post("/v1/predict", bad_value.dump(), "application/json"), 400, "0..255");
  expect_json_error(cli_->Post("/v1/predict?top_k=0", png, "image/png"), 400, "top_k");
  expect_json_error(cli_->Post("/v1/predict?top_k=11", png, "image/png"), 400, "top_k");
  expect_json_error(cli_->Post("/v1/predict", "", "image/png"), 400, "empty body");
  expect_alive();
  EXPECT_EQ(server_->metrics().errors(400), 10);
}

TEST_F(BadRequests, TokensPathsMethodsAndSizes) {
  const std::string png = gray_png(sample_pixels(0), 28, 28);
  httplib::Client anon("127.0.0.1", server_->port());
  expect_json_error(anon.Post("/v1/predict", png, "image/png"), 401, "missing bearer token");
  expect_json_error(anon.Get("/metrics"), 401, "missing");
  httplib::Client wrong("127.0.0.1", server_->port());
  wrong.set_bearer_token_auth("s3cres");
  expect_json_error(wrong.Get("/v1/model"), 401, "wrong bearer token");
  auto health = anon.Get("/healthz");  // probes need no token
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  expect_json_error(cli_->Get("/v2/predict"), 404, "no endpoint /v2/predict");
  expect_json_error(cli_->Post("/predict", png, "image/png"), 404, "no endpoint");
  auto r = cli_->Get("/v1/predict");
  expect_json_error(r, 405, "expected POST");
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  expect_json_error(cli_->Delete("/v1/model"), 405, "expected GET");
  expect_json_error(cli_->Put("/metrics", "x", "text/plain"), 405, "expected GET");
  expect_json_error(cli_->Post("/v1/predict", std::string(1024 * 1024 + 10, 'x'), "image/png"), 413, "--max-body-mb 1");
  expect_alive();
}

// A client that sends half a request and stalls is cut off after --timeout-s (1 s here; the
// bound below only keeps the test from hanging), while other clients are answered.
TEST_F(BadRequests, StalledClientsAreCutOff) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string partial = "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\nabc";
  ASSERT_EQ(::send(fd, partial.data(), partial.size(), 0), static_cast<ssize_t>(partial.size()));
  expect_alive();  // answered while the stalled one waits
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(n, 0) << "the server closed the connection (not our 30 s guard)";
  if (!got.empty()) {  // what httplib answers a cut-off body with, if anything: a JSON error
    EXPECT_NE(got.find("HTTP/1.1 4"), std::string::npos) << got;
    EXPECT_NE(got.find("{\"error\":"), std::string::npos) << got;
  }
  expect_alive();
}

TEST_F(BadRequests, MalformedSamplesLeaveTheBufferAlone) {
  auto record = [](int64_t i, const json& label) { return json{{"label", label}, {"pixels", pixels_json(sample_pixels(i), 28, 28)}}; };
  json good = json::array({record(0, 3), record(1, 4)});
  auto r = cli_->Post("/v1/samples", good.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["buffer_size"], 2);
  EXPECT_EQ(json::parse(r->body)["online_mix"], 0.25);
  // One bad record in three: nothing of the request is added.
  for (const json& bad : {json::array({record(2, 1), record(3, 10), record(4, 2)}),
                          json::array({record(2, 1), record(3, "x")}),
                          json::array({record(2, 1), json{{"label", 1}, {"pixels", json::array({1, 2})}}}),
                          json::array({record(2, 1), json{{"pixels", pixels_json(sample_pixels(0), 28, 28)}}})}) {
    r = cli_->Post("/v1/samples", bad.dump(), "application/json");
    expect_json_error(r, 400, "sample 1");
    EXPECT_EQ(online_->size(), 2) << bad.dump().substr(0, 80);
  }
  expect_json_error(cli_->Post("/v1/samples", gray_png(sample_pixels(0), 28, 28), "image/png"), 400, "?label=");
  r = cli_->Post("/v1/samples?label=9", gray_png(sample_pixels(5), 28, 28), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(online_->size(), 3);
  r = cli_->Get("/v1/model");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["online"]["size"], 3);
  expect_alive();
}

}  // namespace
}  // namespace tandem::testing
