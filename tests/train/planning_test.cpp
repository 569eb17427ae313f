// Throughput planning on a virt device that does not compute (tflops=..&compute=none): with a
// slow loader the summary names the input pipeline and how many loader workers would keep up;
// `tandem train` on Fashion-MNIST says loudly that results are not computed, prints the loss
// and accuracy as n/a (no NaN check fires on the uncomputed values), prints the summary
// without --trace, and refuses --save.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tandem/virt.h"
#include "train/pipeline_run.h"
#include "train/run_tandem.h"

using namespace tandem;
using namespace tandem::testing;
using namespace std::chrono_literals;

namespace {

const char* const kNote =
    "virt compute=none: results are not computed; figures are throughput planning only";
const char* const kFashionMnist = "/usr/share/datasets/fashion-mnist";

}  // namespace

TEST(Planning, SlowLoaderIsNamedWithTheWorkersThatWouldKeepUp) {
  const VirtThrottle before = virt_throttle(5);
  PipelineRun run;
  run.device = "virt:5?tflops=1000&compute=none";
  run.dataset = std::make_shared<TenClassDataset>(1024, 1000us);  // 16 ms per batch per worker
  run.num_workers = 1;
  run.steps = 20;
  const PipelineResult r = run_pipeline(run);
  set_virt_throttle(5, before);
  const profile::Summary& s = r.summary;
  ASSERT_EQ(s.steps, 20);
  EXPECT_EQ(s.limiting_stage, "input") << s.text();
  EXPECT_NE(s.advice.find("the input pipeline is the limit"), std::string::npos) << s.advice;
  // One worker's batch takes >= 16 ms; the rest of the step is a small fraction of that
  // (1000 TFLOP/s and nothing computed): many workers would be needed, more than 2 cores.
  EXPECT_GE(s.input_seconds, 0.016) << s.text();
  EXPECT_GT(s.workers_needed, 2) << s.text();
  // workers needed = ceil(one worker's input per batch / the step without data waits).
  const double ratio = s.input_seconds / s.fed_step_seconds;
  EXPECT_GE(s.workers_needed, ratio * 0.9999) << s.text();
  EXPECT_LT(s.workers_needed - 1, ratio) << s.text();
  EXPECT_NE(s.advice.find("loader workers would keep up"), std::string::npos) << s.advice;
  EXPECT_NE(s.advice.find("more than this CPU's 2 cores"), std::string::npos) << s.advice;
}

TEST(Planning, TrainSaysResultsAreNotComputedAndNamesTheInput) {
  if (!std::filesystem::exists(kFashionMnist))
    GTEST_SKIP() << "no Fashion-MNIST at " << kFashionMnist;
  // --num-workers 0: the training thread loads every batch itself, so each step waits for it;
  // large batches make that wait most of the step (the per-step enqueueing stays the same).
  const CmdResult r = run_tandem(std::string("train --data ") + kFashionMnist +
                                 " --device 'virt:0?tflops=1000&compute=none' --epochs 1 "
                                 "--num-workers 0 --batch-size 1024 --progress 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The banner (after the describe line) and the summary both say it.
  const size_t banner = r.out.find(std::string("\n") + kNote + "\n");
  ASSERT_NE(banner, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(kNote, banner + 2), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train_loss n/a  train_acc n/a  test_loss n/a  test_acc n/a"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("done: best test_acc n/a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("images/s\n"), std::string::npos) << r.out;  // the summary, without --trace
  EXPECT_NE(r.out.find("advice: input-bound: the input pipeline is the limit"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("loader worker"), std::string::npos) << r.out;
}

TEST(Planning, SaveIsRefusedWhenNothingIsTrained) {
  const CmdResult r =
      run_tandem(std::string("train --data ") + kFashionMnist +
                 " --device 'virt:0?compute=none' --epochs 1 --save /tmp/never.safetensors");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(
      last_line(r.out).find("--save /tmp/never.safetensors: the weights would not be trained"),
      std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists("/tmp/never.safetensors"));
}
