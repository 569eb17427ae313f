// End to end: `tandem serve` answers the test images with the classes `tandem eval` scores
// (same correct count on the same weights); `tandem train --serve` answers while it trains,
// with versions that only grow, takes samples into training, and publishes as told; /metrics
// parses with prometheus_client's parser (when the peers venv has it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include "serve/serve_process.h"
#include "serve/serve_test_util.h"
#include "train/idx_split.h"
#include "train/run_tandem.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CliServe : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_serve_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    write_split(dir_ / "data", "train", 512, true, 1);
    write_split(dir_ / "data", "t10k", 300, false, 2);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string data() const { return "--data " + (dir_ / "data").string(); }
  // The raw test split: u8 [300, 28, 28] and labels.
  void read_test(std::vector<uint8_t>& images, std::vector<uint8_t>& labels) const {
    std::ifstream im(dir_ / "data/t10k-images-idx3-ubyte", std::ios::binary), lb(dir_ / "data/t10k-labels-idx1-ubyte", std::ios::binary);
    std::vector<uint8_t> a((std::istreambuf_iterator<char>(im)), {}), b((std::istreambuf_iterator<char>(lb)), {});
    images.assign(a.begin() + 16, a.end());
    labels.assign(b.begin() + 8, b.end());
  }
  fs::path dir_;
};

TEST_F(CliServe, ServeAnswersWhatEvalScores) {
  const std::string w = (dir_ / "w.safetensors").string();
  ASSERT_EQ(run_tandem("train " + data() + " --epochs 1 --batch-size 32 --threads 1 --progress 0 --save " + w).exit_code, 0);
  const CmdResult e = run_tandem("eval " + data() + " --weights " + w + " --threads 1");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(e.out, m, std::regex(R"(\((\d+) / 300\))"))) << e.out;
  const int eval_correct = std::stoi(m[1]);
  TandemProcess serve("serve " + data() + " --weights " + w + " --listen 127.0.0.1:0 --serve-threads 1", dir_);
  const int port = serve.wait_port();
  ASSERT_GT(port, 0) << serve.output();
  std::vector<uint8_t> images, labels;
  read_test(images, labels);
  httplib::Client cli("127.0.0.1", port);
  int correct = 0, answered = 0;
  for (int b = 0; b < 3; ++b) {  // 3 requests of 100 images, JSON [N, 1, 28, 28]
    json batch = json::array();
    for (int i = b * 100; i < (b + 1) * 100; ++i)
      batch.push_back(pixels_json(std::vector<uint8_t>(images.begin() + i * 784, images.begin() + (i + 1) * 784), 28, 28));
    auto r = cli.Post("/v1/predict", batch.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    for (int i = 0; i < 100; ++i, ++answered) correct += j["predictions"][static_cast<size_t>(i)]["class"] == labels[static_cast<size_t>(b * 100 + i)];
  }
  EXPECT_EQ(answered, 300);
  EXPECT_EQ(correct, eval_correct);
  // The same images one by one as PNG give the same classes as the batched JSON.
  auto r = cli.Post("/v1/predict", gray_png(std::vector<uint8_t>(images.begin(), images.begin() + 784), 28, 28), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(serve.finish(true), 0) << serve.output();
  EXPECT_NE(serve.output().find("stopped by signal 15 after 4 predict requests"), std::string::npos) << serve.output();
}

// Start-up errors: one line naming the flag, exit code 2, before any data is read.
TEST_F(CliServe, BadServeFlagsAreOneLineErrors) {
  for (const char* serve : {"127.0.0.1", "127.0.0.1:", ":8080", "127.0.0.1:99999"}) {
    const CmdResult r = run_tandem("train --data /nonexistent --model mlp --serve " + std::string(serve));
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_EQ(r.out, fmt::format("tandem: error: [serve] --serve {}: expected {}\n", serve,
                                 serve == std::string("127.0.0.1:99999") ? "a port in 0..65535 after the colon"
                                                                         : "HOST:PORT, e.g. 127.0.0.1:8080"));
  }
}

TEST_F(CliServe, TrainServesGrowingVersionsAndTakesSamples) {
  // 512 samples / 32 = 16 steps per epoch, 2 epochs: version 0, every 4 steps (8), after each
  // evaluation (2): 11 publishes. The mlp trains in a fraction of a second, which left a loaded
  // machine no time to answer a request before the run ended; on virt with 30 ms per copy the
  // 32 steps take seconds whatever the load.
  TandemProcess train("train " + data() + " --model mlp --epochs 2 --batch-size 32 --threads 1 --progress 0 "
                      "--device 'virt:0?latency_us=30000' "
                      "--serve 127.0.0.1:0 --publish-every 4 --online-mix 0.25 --serve-threads 1",
                      dir_);
  const int port = train.wait_port();
  ASSERT_GT(port, 0) << train.output();
  httplib::Client cli("127.0.0.1", port);
  json rec = {{"label", 7}, {"pixels", pixels_json(sample_pixels(1), 28, 28)}};
  auto s = cli.Post("/v1/samples", json::array({rec, rec}).dump(), "application/json");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200) << s->body;
  int64_t last = -1, answers = 0;
  const std::string png = gray_png(sample_pixels(2), 28, 28);
  while (!train.exited()) {
    auto r = cli.Post("/v1/predict", png, "image/png");
    if (!r) continue;  // the run ended between the check and the request
    ASSERT_EQ(r->status, 200) << r->body;
    const int64_t v = json::parse(r->body)["version"];
    EXPECT_GE(v, last);
    last = v;
    ++answers;
  }
  EXPECT_EQ(train.finish(false), 0) << train.output();
  EXPECT_GT(answers, 0);
  const std::string out = train.output();
  EXPECT_NE(out.find("11 versions published, 2 samples taken"), std::string::npos) << out;
  EXPECT_NE(out.find("serving on http://127.0.0.1:"), std::string::npos) << out;
}

TEST(ServeMetricsText, ParsesWithPrometheusClient) {
  const char* py = "/opt/peers/bin/python";
  if (::access(py, X_OK) != 0 || std::system("/opt/peers/bin/python -c 'import prometheus_client' 2>/dev/null") != 0)
    GTEST_SKIP() << "needs prometheus_client in the peers venv (/opt/peers/bin/pip install prometheus_client)";
  const train::ModelCard card = synthetic_card();
  auto server = start_server(card, {}, std::make_shared<serve::OnlineBuffer>(8, 784, 10, 0), 0.1);
  server->publish(seeded_weights(card, 1, 3));
  auto cli = client_of(*server);
  for (int i = 0; i < 3; ++i) cli->Post("/v1/predict", gray_png(sample_pixels(i), 28, 28), "image/png");
  cli->Get("/nowhere");
  serve::TrainingGauges g;
  g.step = 3, g.loss = 0.5, g.accuracy = 0.8, g.images_per_s = 900, g.data_wait_share = 0.1;
  server->metrics().set_training(g);
  auto r = cli->Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const fs::path f = fs::temp_directory_path() / ("tandem_metrics_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(f) << r->body;
  const std::string cmd = std::string(py) + " -c \"import sys; from prometheus_client.parser import "
                          "text_string_to_metric_families as p; fams = {f.name: f for f in p(open(sys.argv[1]).read())}; "
                          "assert fams['tandem_serve_requests'].samples, fams; "
                          "assert fams['tandem_serve_request_duration_seconds'].type == 'histogram'; "
                          "assert [s.value for s in fams['tandem_serve_model_version'].samples] == [3.0]; "
                          "assert [s.value for s in fams['tandem_train_loss'].samples] == [0.5]; "
                          "print(len(fams))\" " + f.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << r->body;
  fs::remove(f);
}

// An error right after the server starts (an unwritable --port-file) stops `tandem serve` with
// one line and a non-zero exit: it used to stop the HTTP loop before that loop had begun, and
// then wait for it for ever.
TEST_F(CliServe, AnUnwritablePortFileStopsServeWithOneLine) {
  const std::string w = (dir_ / "w.safetensors").string();
  ASSERT_EQ(run_tandem("train " + data() + " --epochs 1 --batch-size 32 --threads 1 --progress 0 --save " + w).exit_code, 0);
  const std::string port_file = (dir_ / "no/such/folder/port").string();
  const CmdResult r = run_tandem("serve " + data() + " --weights " + w + " --listen 127.0.0.1:0 --port-file " + port_file,
                                 "2>&1", "timeout -s KILL 60");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.exit_code, 137) << "killed by the 60 s guard: serve hung\n" << r.out;
  EXPECT_NE(r.out.find("tandem: error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(port_file), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem::testing
