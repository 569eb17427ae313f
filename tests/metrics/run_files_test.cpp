// End to end: a 2-epoch `tandem train` with --metrics-file, --tensorboard, --trace and
// --show-utilization, then `tandem report`. The metrics file's records against the printed
// epoch lines and against each other, the event files read by TensorBoard, every plot of the
// report drawn; a run that fails still stops its sampler and keeps what it wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/temp_dir.h"
#include "metrics/html_plots.h"
#include "metrics/tb_readback.h"
#include "tandem/metrics/jsonl_writer.h"
#include "tandem/metrics/report.h"
#include "tandem/rng.h"
#include "train/run_tandem.h"

namespace tandem::metrics {
namespace {

using nlohmann::json;
using testing::TempDir;

// A small learnable split: class c has a bright bar at row 2c + 4 over low noise.
void write_split(const TempDir& dir, const std::string& split, uint32_t n, uint64_t seed) {
  testing::Bytes images(static_cast<size_t>(n) * 784), labels(n);
  Philox rng(seed, n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t c = rng.randint(10);
    labels[i] = static_cast<uint8_t>(c);
    for (int p = 0; p < 784; ++p) images[i * 784 + static_cast<size_t>(p)] = static_cast<uint8_t>(rng.randint(40));
    for (int x = 0; x < 28; ++x) images[i * 784 + (2 * c + 4) * 28 + static_cast<size_t>(x)] = 255;
  }
  testing::write_file(dir.file(split + "-images-idx3-ubyte"), testing::idx_bytes({n, 28, 28}, images));
  testing::write_file(dir.file(split + "-labels-idx1-ubyte"), testing::idx_bytes({n}, labels));
}

class RunFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    write_split(dir_, "train", 512, 1);
    write_split(dir_, "t10k", 200, 2);
  }
  std::string train_args() const {
    return "train --data " + dir_.str() + " --model mlp --epochs 2 --batch-size 32 --threads 1 --progress 0";
  }
  TempDir dir_;
};

struct EpochLine {
  int epoch;
  std::string train_loss, train_acc, test_loss, test_acc, ips, seconds, cpu, loader;
};

std::vector<EpochLine> epoch_lines(const std::string& out) {
  const std::regex re(
      R"(epoch (\d+)/2  train_loss (\S+)  train_acc (\S+)%  test_loss (\S+)  test_acc (\S+)%  (\d+) img/s  (\S+) s  cpu (\d+)% \(loader (\d+)%\), device memory \S+ MiB)");
  std::vector<EpochLine> v;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    v.push_back({std::stoi(m[1]), m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9]});
  }
  return v;
}

TEST_F(RunFiles, MetricsFileTensorBoardAndReportAgreeWithThePrintedRun) {
  const std::string m = dir_.file("run.jsonl"), tb = dir_.file("tb"), trace = dir_.file("t.json");
  const auto r = testing::run_tandem(train_args() + " --metrics-file " + m + " --tensorboard " + tb + " --trace " +
                                     trace + " --show-utilization");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<EpochLine> lines = epoch_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;

  const std::vector<json> recs = read_json_lines(m);
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs.front()["type"], "run");
  EXPECT_EQ(recs.front()["schema"], 1);
  EXPECT_EQ(recs.front()["batch_size"], 32);
  EXPECT_EQ(recs.back()["type"], "summary");
  std::vector<json> windows, epochs;
  for (const json& j : recs) {
    if (j["type"] == "window") windows.push_back(j);
    if (j["type"] == "epoch") epochs.push_back(j);
  }
  // 512 samples / 32 = 16 steps per epoch, read back at steps 10 and 16 (--log-interval 10).
  ASSERT_EQ(windows.size(), 4u);
  ASSERT_EQ(epochs.size(), 2u);
  int64_t last_global = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    const json& w = windows[i];
    for (const char* k : {"epoch", "step", "global_step", "samples"}) EXPECT_TRUE(w[k].is_number_integer()) << k;
    for (const char* k : {"time_s", "loss", "accuracy", "lr", "images_per_s", "data_wait_share"})
      EXPECT_TRUE(w[k].is_number()) << k << " in " << w.dump();
    EXPECT_EQ(w["step"], i % 2 == 0 ? 10 : 16);
    EXPECT_EQ(w["samples"], i % 2 == 0 ? 320 : 192);
    EXPECT_GT(w["global_step"].get<int64_t>(), last_global);
    last_global = w["global_step"];
    EXPECT_GT(w["lr"].get<double>(), 0);
    EXPECT_GE(w["data_wait_share"].get<double>(), 0);
    EXPECT_LE(w["data_wait_share"].get<double>(), 1);
    EXPECT_GE(w["accuracy"].get<double>(), 0);
    EXPECT_LE(w["accuracy"].get<double>(), 1);
  }
  EXPECT_EQ(windows.back()["global_step"], 32);
  for (int e = 0; e < 2; ++e) {
    const json& rec = epochs[static_cast<size_t>(e)];
    const EpochLine& line = lines[static_cast<size_t>(e)];
    EXPECT_EQ(rec["epoch"], e + 1);
    // The printed figures are the record's, rounded as printed.
    EXPECT_EQ(fmt::format("{:.4f}", rec["train_loss"].get<double>()), line.train_loss);
    EXPECT_EQ(fmt::format("{:.2f}", 100 * rec["train_accuracy"].get<double>()), line.train_acc);
    EXPECT_EQ(fmt::format("{:.4f}", rec["test_loss"].get<double>()), line.test_loss);
    EXPECT_EQ(fmt::format("{:.2f}", 100 * rec["test_accuracy"].get<double>()), line.test_acc);
    EXPECT_EQ(fmt::format("{:.0f}", rec["images_per_s"].get<double>()), line.ips);
    EXPECT_EQ(fmt::format("{:.1f}", rec["seconds"].get<double>()), line.seconds);
    EXPECT_EQ(fmt::format("{:.0f}", 100 * rec["utilization"]["cpu_busy"].get<double>()), line.cpu);
    EXPECT_EQ(fmt::format("{:.0f}", 100 * rec["utilization"]["loader_busy"].get<double>()), line.loader);
    // The epoch's training loss is the sample-weighted mean of its windows' losses.
    const json& w1 = windows[static_cast<size_t>(2 * e)];
    const json& w2 = windows[static_cast<size_t>(2 * e + 1)];
    const double mean = (w1["loss"].get<double>() * 320 + w2["loss"].get<double>() * 192) / 512;
    EXPECT_NEAR(rec["train_loss"].get<double>(), mean, 1e-9 * mean);
    EXPECT_EQ(rec["lr"], w2["lr"]);
    EXPECT_EQ(rec["global_step"], w2["global_step"]);
    EXPECT_TRUE(rec["profile"]["stage_seconds"]["forward"].get<double>() > 0) << rec.dump();
    EXPECT_GE(rec["utilization"]["per_core"].size(), 1u);
  }

  const TbReadback back = read_with_tensorboard(tb);
  if (!back.available) {
    std::printf("TensorBoard read-back skipped: %s\n", back.why.c_str());
  } else {
    ASSERT_TRUE(back.ok) << back.why;
    const auto& loss = back.scalars.at("train/loss");
    ASSERT_EQ(loss.size(), windows.size());
    for (size_t i = 0; i < windows.size(); ++i) {
      EXPECT_EQ(loss[i].first, windows[i]["global_step"].get<int64_t>());
      EXPECT_FLOAT_EQ(loss[i].second, static_cast<float>(windows[i]["loss"].get<double>()));
    }
    const auto& acc = back.scalars.at("epoch/test_accuracy");
    ASSERT_EQ(acc.size(), 2u);
    for (size_t e = 0; e < 2; ++e) {
      EXPECT_EQ(acc[e].first, epochs[e]["global_step"].get<int64_t>());
      EXPECT_FLOAT_EQ(acc[e].second, static_cast<float>(epochs[e]["test_accuracy"].get<double>()));
    }
    EXPECT_EQ(back.scalars.count("stage/forward_s"), 1u);
    EXPECT_EQ(back.scalars.at("epoch/cpu_busy").size(), 2u);
  }

  const std::string html_path = dir_.file("report.html");
  const auto rep = testing::run_tandem("report " + m + " --trace " + trace + " --out " + html_path);
  ASSERT_EQ(rep.exit_code, 0) << rep.out;
  std::ifstream in(html_path);
  std::stringstream html;
  html << in.rdbuf();
  for (const std::string& name : report_plot_names()) EXPECT_TRUE(plot_drawn(plot_svg(html.str(), name))) << name;
  EXPECT_TRUE(std::regex_search(html.str(), std::regex("advice:</b> [a-z]+-bound")))
      << "the advice line names the limiting stage";
}

TEST_F(RunFiles, AFailingRunStopsAndKeepsWhatItWrote) {
  const std::string m = dir_.file("nan.jsonl");
  const auto r = testing::run_tandem(train_args() + " --optimizer sgd --momentum 0 --lr 1e30 --schedule constant "
                                     "--metrics-file " + m + " --tensorboard " + dir_.file("tb") + " --show-utilization");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_FALSE(r.signaled);
  EXPECT_NE(testing::last_line(r.out).find("loss is"), std::string::npos) << r.out;
  const std::vector<json> recs = read_json_lines(m);
  ASSERT_GE(recs.size(), 2u);
  EXPECT_EQ(recs.front()["type"], "run");
  EXPECT_EQ(recs.back()["type"], "window");  // the NaN window itself is recorded (loss null)
  EXPECT_TRUE(recs.back()["loss"].is_null()) << recs.back().dump();
}

TEST_F(RunFiles, AnUnwritableMetricsFileIsRefusedBeforeTraining) {
  const auto r = testing::run_tandem(train_args() + " --metrics-file " + dir_.file("missing/m.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(testing::last_line(r.out).find("--metrics-file"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("epoch 1/2"), std::string::npos);
  const auto same = testing::run_tandem(train_args() + " --metrics-file " + dir_.file("x") + " --trace " + dir_.file("x"));
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_NE(testing::last_line(same.out).find("expected a different file from --trace"), std::string::npos) << same.out;
}

// A metrics file whose field has another type than train writes: one line naming the file,
// exit 2, no report written.
TEST(ReportCommand, AFieldOfTheWrongTypeIsNamed) {
  TempDir dir;
  std::ofstream(dir.file("bad.jsonl")) << "{\"type\":\"run\"}\n{\"type\":\"epoch\",\"epoch\":\"x\"}\n";
  const auto r = testing::run_tandem("report " + dir.file("bad.jsonl") + " --out " + dir.file("r.html"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  EXPECT_NE(r.out.find(dir.file("bad.jsonl") + ": a record holds a field of the wrong type"), std::string::npos) << r.out;
  EXPECT_FALSE(std::ifstream(dir.file("r.html")).good());
}

}  // namespace
}  // namespace tandem::metrics
