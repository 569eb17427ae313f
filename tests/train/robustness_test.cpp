// Robustness of the `tandem` command against bad input found by probing every flag and file:
// an unwritable --save is refused before training, malformed safetensors headers are refused
// with the file and entry named, an evaluation batch size far above the test set does not size
// the loader's buffers, and output lost to a full disk is an error; --trace is checked like
// --save, device nodes and FIFOs are not replaced by output files, empty and non-decimal flag
// values are refused, virt options name --device, and running out of virt memory is an error
// line and exit code 1, never a crash while the process exits.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include "train/run_tandem.h"

namespace fs = std::filesystem;
using tandem::testing::CmdResult;
using tandem::testing::last_line;
using tandem::testing::run_tandem;

namespace {

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, size_t payload_size) {
  std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  for (size_t i = 0; i < payload_size; ++i) b.push_back(static_cast<uint8_t>(i % 10));  // also valid labels
  return b;
}

// Raw IDX files: n images of side x side (28 unless given) with labels i % 10.
void write_split(const fs::path& dir, const std::string& split, uint32_t n, uint32_t side = 28) {
  const auto img = idx_bytes({n, side, side}, static_cast<size_t>(n) * side * side);
  const auto lab = idx_bytes({n}, n);
  write_bytes(dir / (split + "-images-idx3-ubyte"), std::string(img.begin(), img.end()));
  write_bytes(dir / (split + "-labels-idx1-ubyte"), std::string(lab.begin(), lab.end()));
}

// A safetensors file: 8-byte little-endian header length, the JSON header, `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data = "") {
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 255);
  return b + header + data;
}

class Robustness : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_robust_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    write_split(dir_ / "data", "train", 64);
    write_split(dir_ / "data", "t10k", 20);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string train_args() const {
    return "train --data " + (dir_ / "data").string() + " --model mlp --epochs 1 --batch-size 16 --progress 0";
  }
  std::string eval_args(const fs::path& weights) const {
    return "eval --data " + (dir_ / "data").string() + " --model mlp --weights " + weights.string();
  }
  // Exit code 2, a one-line "tandem: error:" naming `needle` last, no signal.
  static void expect_error(const CmdResult& r, const std::string& needle) {
    EXPECT_FALSE(r.signaled) << r.out;
    EXPECT_EQ(r.exit_code, 2) << r.out;
    const std::string line = last_line(r.out);
    EXPECT_EQ(line.rfind("tandem: error: ", 0), 0u) << line;
    EXPECT_NE(line.find(needle), std::string::npos) << "expected '" << needle << "' in: " << line;
  }
  fs::path dir_;
};

TEST_F(Robustness, UnwritableSaveIsRefusedBeforeTraining) {
  fs::create_directories(dir_ / "adir");
  for (const fs::path& save : {dir_ / "adir", dir_ / "no" / "such" / "w.safetensors"}) {
    CmdResult r = run_tandem(train_args() + " --save " + save.string());
    expect_error(r, "--save");
    EXPECT_EQ(r.out.find("epoch 1/1"), std::string::npos) << "trained before refusing --save:\n" << r.out;
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "adir"));
  EXPECT_FALSE(fs::exists(dir_ / "no"));
}

TEST_F(Robustness, SaveReplacesAnExistingFileOnlyOnSuccess) {
  const fs::path save = dir_ / "w.safetensors";
  write_bytes(save, "old");
  // NaN loss: the old file stays as it was.
  CmdResult bad = run_tandem(train_args() + " --optimizer sgd --momentum 0 --lr 1e30 --schedule constant --save " +
                             save.string());
  expect_error(bad, "loss");
  std::ifstream in(save, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "old");
  CmdResult ok = run_tandem(train_args() + " --save " + save.string());
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_GT(fs::file_size(save), 784u * 256u * 4u);  // 1.weight alone
  for (auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos);
}

TEST_F(Robustness, MalformedWeightsNameTheFileAndEntry) {
  // A directory opens as a stream but has no length: the error must not quote garbage sizes.
  fs::create_directories(dir_ / "wdir");
  CmdResult r = run_tandem(eval_args(dir_ / "wdir"));
  expect_error(r, "wdir: expected a safetensors file");

  // A text file: its first 8 bytes read as a huge header length.
  const fs::path text = dir_ / "notes.txt";
  write_bytes(text, "tandem weights are not in this file\n");
  expect_error(run_tandem(eval_args(text)), "notes.txt: not a safetensors file");

  // Dimensions whose product wraps to 0 bytes must not pass as an empty tensor.
  const fs::path wrap = dir_ / "wrap.safetensors";
  write_bytes(wrap, safetensors_bytes(R"({"3.bias":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})"));
  expect_error(run_tandem(eval_args(wrap)), "entry '3.bias': the shape's dimensions multiply past 2^63 bytes");

  // A scalar where the shape array belongs.
  const fs::path scalar = dir_ / "scalar.safetensors";
  write_bytes(scalar, safetensors_bytes(R"({"3.bias":{"dtype":"F32","shape":10,"data_offsets":[0,40]}})",
                                        std::string(40, '\0')));
  expect_error(run_tandem(eval_args(scalar)), "scalar.safetensors: entry '3.bias': shape must be an array");

  // Offsets whose end comes before their begin.
  const fs::path backwards = dir_ / "backwards.safetensors";
  write_bytes(backwards, safetensors_bytes(R"({"3.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})",
                                           std::string(8, '\0')));
  expect_error(run_tandem(eval_args(backwards)), "entry '3.bias': data_offsets [8, 4] end before they begin");

  // An unknown dtype names the file and the entry.
  const fs::path dtype = dir_ / "dtype.safetensors";
  write_bytes(dtype, safetensors_bytes(R"({"3.bias":{"dtype":"Q9","shape":[10],"data_offsets":[0,40]}})",
                                       std::string(40, '\0')));
  expect_error(run_tandem(eval_args(dtype)), "dtype.safetensors: entry '3.bias': unsupported dtype 'Q9'");
}

TEST_F(Robustness, EvalBatchSizeAboveTheTestSetIsOneBatch) {
  // 1e11 samples per batch would be 313 TB of buffers; the 20 test samples fit in one batch.
  CmdResult r = run_tandem(train_args() + " --eval-batch-size 100000000000");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 1/1"), std::string::npos) << r.out;
}

TEST_F(Robustness, LostStdoutIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  CmdResult r = run_tandem("info", "2>&1 >/dev/full");
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot write to standard output"), std::string::npos) << r.out;
}

TEST_F(Robustness, TraceAndSavePathsAreCheckedBeforeTraining) {
  fs::create_directories(dir_ / "adir");
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --trace " + (dir_ / "no" / "t.json").string(), "--trace"},
      {" --trace " + (dir_ / "adir").string(), "--trace"},
      // Renaming the finished file over a FIFO or device node (as root: /dev/null) replaces it.
      {" --trace " + fifo.string(), "expected a regular file path"},
      {" --save " + fifo.string(), "expected a regular file path"},
      {" --save " + (dir_ / "x").string() + " --trace " + (dir_ / "x").string(), "--trace"},
  };
  for (const auto& [args, needle] : cases) {
    CmdResult r = run_tandem(train_args() + args);
    expect_error(r, needle);
    EXPECT_EQ(r.out.find("epoch 1/1"), std::string::npos) << "trained before refusing:" << args << "\n" << r.out;
  }
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_TRUE(fs::is_empty(dir_ / "adir"));
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

TEST_F(Robustness, EmptyAndNonDecimalValuesAreRefused) {
  for (const char* flag : {"--epochs", "--lr", "--save", "--trace", "--simd", "--device", "--num-workers"})
    expect_error(run_tandem(train_args() + " " + flag + " ''"), std::string(flag) + ": expected a value");
  expect_error(run_tandem(train_args() + " --seed -1"), "--seed: expected a decimal integer >= 0");
  expect_error(run_tandem(train_args() + " --seed 18446744073709551616"), "--seed: expected an integer in");
  expect_error(run_tandem(train_args() + " --log-interval 99999999999999999999"), "--log-interval");
  expect_error(run_tandem(train_args() + " --num-workers 0x2"), "--num-workers: expected a decimal integer");
  // A leading zero is decimal, not octal: 010 is 10 samples per batch, not 8.
  CmdResult r = run_tandem("train --data " + (dir_ / "data").string() + " --model mlp --epochs 1 --progress 0 --batch-size 010");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(", batch 10,"), std::string::npos) << r.out;
}

TEST_F(Robustness, OutOfRangeValuesNameTheFlag) {
  for (const char* opt : {"speed=inf", "speed=1e-300", "latency_us=inf", "bw=inf", "memory_mb=inf", "memory_mb=1e30"}) {
    const std::string option = opt;
    expect_error(run_tandem(train_args() + " --device 'virt:0?" + option + "'"),
                 "--device virt:0?" + option + ": " + option.substr(0, option.find('=')) + ": expected");
  }
  expect_error(run_tandem(train_args() + " --eps inf"), "--eps: expected a finite value");
  // Cosine needs at least one step after warmup: 64 samples / 16 = 4 steps, all warmup.
  expect_error(run_tandem(train_args() + " --warmup-epochs 1"), "--warmup-epochs 1: expected fewer warmup steps");
  // A run of fewer steps than the default warm-up (0.2 epochs: 1 of 4 steps here) takes a fifth
  // of its steps and runs; a --warmup-epochs given is kept and refused.
  const CmdResult short_run = run_tandem(train_args() + " --max-steps 1");
  EXPECT_EQ(short_run.exit_code, 0) << short_run.out;
  expect_error(run_tandem(train_args() + " --max-steps 1 --warmup-epochs 0.5"),
               "--warmup-epochs 0.5: expected fewer warmup steps than the run's 1 steps");
  if (!__builtin_cpu_supports("avx512f")) {
    CmdResult r = run_tandem(train_args() + " --simd avx512");
    EXPECT_FALSE(r.signaled) << r.out;
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(last_line(r.out).find("--simd avx512: this CPU does not support it"), std::string::npos) << r.out;
  }
  // A bucket cap past any model is one bucket (the MiB-to-bytes conversion no longer overflows).
  CmdResult big = run_tandem(train_args() + " --optimizer-device cpu --bucket-cap-mb 1e300");
  EXPECT_EQ(big.exit_code, 0) << big.out;
  EXPECT_NE(big.out.find("1 bucket,"), std::string::npos) << big.out;
}

TEST_F(Robustness, DeviceOutOfMemoryIsAnErrorNotACrash) {
  // 2 MiB hold the mlp's parameters and the batch buffers (batches of 4, read-back every
  // step: rings of 5 batches) but not its Adam state: the run fails mid-step with work
  // still queued on the device's stream, which must finish before the process exits. Before
  // that drain, most runs died after the error line (SIGSEGV or a double free in oneDNN's
  // static destructors); a few runs make the test sensitive to it. The memory plan would refuse
  // the run before training (tests/memory/); a budget above the cap lets it start.
  const std::string args =
      "train --data " + (dir_ / "data").string() +
      " --model mlp --epochs 1 --batch-size 4 --eval-batch-size 4 --log-interval 1 --progress 0"
      " --device-memory-budget 1TiB";
  for (int i = 0; i < 4; ++i) {
    for (const char* extra : {"", " --num-workers auto --prefetch auto"}) {
      CmdResult r = run_tandem(args + " --device 'virt:0?memory_mb=2'" + extra);
      EXPECT_FALSE(r.signaled) << r.out;
      EXPECT_EQ(r.exit_code, 1) << r.out;
      const std::string line = last_line(r.out);
      EXPECT_EQ(line.rfind("tandem: error: [train] out of memory in step ", 0), 0u) << line;
      EXPECT_NE(line.find("[alloc] cannot allocate"), std::string::npos) << line;
      EXPECT_NE(line.find("memory_mb"), std::string::npos) << line;
    }
  }
}

TEST_F(Robustness, ExtremeIntervalsAndBatchSizesStillCountEverySample) {
  // 2 x K must not overflow into a negative ring; a batch size near 2^63 must not wrap the
  // batch count to 0 (evaluating nothing).
  CmdResult r = run_tandem(train_args() + " --device virt --log-interval 9223372036854775807 --eval-batch-size "
                                          "9223372036854775807");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 1/1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("test_acc 0.00%"), std::string::npos) << r.out;
}

TEST_F(Robustness, VirtOptionsGivenTwiceOrBelowOneByteAreRefused) {
  expect_error(run_tandem(train_args() + " --device 'virt:0?speed=1&speed=2'"), "option 'speed' given twice");
  expect_error(run_tandem(train_args() + " --device 'virt:0?memory_mb=1e-9'"), "memory_mb: expected a value in");
}

TEST_F(Robustness, TraceLeavesAFileNamedLikeItsTemporaryAlone) {
  // The trace is written to "<path>.tmp-<pid>" (exclusively) and renamed: a user's file called
  // "<path>.tmp" is neither consumed nor replaced.
  const fs::path trace = dir_ / "t.json";
  write_bytes(dir_ / "t.json.tmp", "notes\n");
  CmdResult r = run_tandem(train_args() + " --trace " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(trace));
  std::ifstream in(dir_ / "t.json.tmp");
  std::string notes;
  std::getline(in, notes);
  EXPECT_EQ(notes, "notes");
  for (auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(Robustness, OutputPathsAreCheckedAsFilesBeforeTraining) {
  // The same file under two spellings, and a name too long for its temporary file: refused
  // before any training.
  const std::string w = (dir_ / "w.st").string();
  expect_error(run_tandem(train_args() + " --save " + w + " --trace " + (dir_ / "." / "w.st").string()),
               "expected a different file from --save");
  expect_error(run_tandem(train_args() + " --save " + (dir_ / std::string(250, 'a')).string()),
               "--save: expected a file name of at most");
  EXPECT_FALSE(fs::exists(w));
}

TEST_F(Robustness, RepeatedFlagsAndAMissingCommandAreNamed) {
  expect_error(run_tandem(train_args() + " --model mlp"), "--model given 2 times: expected it once (see tandem train --help)");
  expect_error(run_tandem(""), "expected a command: one of train, eval, info");
  expect_error(run_tandem(eval_args(dir_ / "none.st") + " --batch-size 0"), "[eval] --batch-size: expected an integer >= 1");
}

TEST_F(Robustness, ErrorAfterAProgressBarStartsOnItsOwnLine) {
  // stdout and stderr into one pipe, the bar forced on: the error must not be glued to it.
  CmdResult r = run_tandem("train --data " + (dir_ / "data").string() +
                           " --model mlp --epochs 2 --batch-size 16 --progress 1 --log-interval 1 --optimizer sgd "
                           "--momentum 0 --lr 1e30 --schedule constant");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("\ntandem: error: [train] loss is"), std::string::npos) << r.out;
}

TEST_F(Robustness, NonFiniteTestLossIsAnError) {
  // Weights full of NaN: the test loss is NaN and the accuracy meaningless.
  fs::path weights = dir_ / "w.safetensors";
  ASSERT_EQ(run_tandem(train_args() + " --save " + weights.string()).exit_code, 0);
  // Overwrite every float of the data section with a NaN bit pattern (0x7fc00000).
  std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
  unsigned char len_bytes[8];
  f.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | len_bytes[i];
  const auto size = static_cast<uint64_t>(fs::file_size(weights));
  f.seekp(static_cast<std::streamoff>(8 + header));
  const unsigned char nan_bits[4] = {0x00, 0x00, 0xc0, 0x7f};
  for (uint64_t b = 8 + header; b + 4 <= size; b += 4) f.write(reinterpret_cast<const char*>(nan_bits), 4);
  f.close();
  CmdResult r = run_tandem(eval_args(weights));
  EXPECT_FALSE(r.signaled) << r.out;
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(last_line(r.out).rfind("tandem: error: [eval] test loss is NaN", 0), 0u) << r.out;
}

TEST_F(Robustness, DeviceRingThatDoesNotFitNamesTheFlags) {
  // 3 MiB hold the parameters but not the batch buffers the loop runs ahead with (2 MiB
  // segments): refused before training,
  // naming the buffers and the flags that size them (the memory plan, which refuses it first,
  // is given a budget above the cap: tests/memory/ has its refusals).
  CmdResult r =
      run_tandem(train_args() + " --device 'virt:0?memory_mb=3' --device-memory-budget 1TiB");
  EXPECT_FALSE(r.signaled) << r.out;
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const std::string line = last_line(r.out);
  EXPECT_EQ(line.rfind("tandem: error: [train] [prefetcher] reserve: ", 0), 0u) << line;
  EXPECT_NE(line.find("batches: lower --log-interval or --"), std::string::npos) << line;
  EXPECT_EQ(r.out.find("epoch 1/1"), std::string::npos) << r.out;
}

}  // namespace

// fmnist-cnn weights trained on 8x8 images have the tensor shapes of a model for 9x9..11x11
// (two floor halvings give 2x2 either way): evaluating them there used to pass silently. The
// file records the sample shape and classes; eval compares them with the test set.
TEST_F(Robustness, EvalOnImagesOfAnotherSizeNamesBothShapes) {
  for (const char* name : {"small", "other"}) fs::create_directories(dir_ / name);
  write_split(dir_ / "small", "train", 64, 8);
  write_split(dir_ / "small", "t10k", 20, 8);
  write_split(dir_ / "other", "t10k", 20, 9);
  const fs::path w = dir_ / "w.safetensors";
  const CmdResult t =
      run_tandem("train --data " + (dir_ / "small").string() +
                 " --model fmnist-cnn --epochs 1 --batch-size 16 --progress 0 --threads 1 --save " +
                 w.string());
  ASSERT_EQ(t.exit_code, 0) << t.out;
  const std::string eval =
      "eval --model fmnist-cnn --threads 1 --weights " + w.string() + " --data ";
  const CmdResult same = run_tandem(eval + (dir_ / "small").string());
  EXPECT_EQ(same.exit_code, 0) << same.out;
  expect_error(run_tandem(eval + (dir_ / "other").string()),
               "[eval] " + w.string() +
                   " holds a model trained on 1x8x8 images of 10 classes, but --data " +
                   (dir_ / "other").string() + " holds 1x9x9 images of 10 classes");
}

namespace {

// Mixed precision from the command line (docs/mixed-precision.md): a NaN loss in bf16 stops the
// run with the fp32 error; fp16 on virt trains with the loss scaler and reports it; --save
// from bf16 writes f32 master weights unless --save-dtype bf16, and eval reads both.
class Precision : public Robustness {};

TEST_F(Precision, NanLossInBf16StopsWithTheFp32Error) {
  const std::string nan_run = train_args() + " --optimizer sgd --momentum 0 --lr 1e30 --schedule constant";
  CmdResult f32 = run_tandem(nan_run);
  CmdResult bf16 = run_tandem(nan_run + " --precision bf16");
  expect_error(f32, "loss is");
  expect_error(bf16, "loss is");
  EXPECT_EQ(last_line(bf16.out), last_line(f32.out));
}

TEST_F(Precision, Fp16OnVirtReportsTheLossScale) {
  CmdResult r = run_tandem(train_args() + " --precision fp16 --device virt");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("dynamic loss scaling"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("note: f16 stored, computed in f32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loss_scale 65536 skipped 0"), std::string::npos) << r.out;
  CmdResult none = run_tandem(train_args() + " --precision bf16");
  ASSERT_EQ(none.exit_code, 0) << none.out;
  EXPECT_EQ(none.out.find("loss_scale"), std::string::npos) << "bf16 runs without a scaler by default:\n" << none.out;
}

TEST_F(Precision, SaveFromBf16WritesMasterWeights) {
  for (const std::string dtype : {"fp32", "bf16"}) {
    const fs::path save = dir_ / ("w_" + dtype + ".safetensors");
    CmdResult r = run_tandem(train_args() + " --precision bf16 --save " + save.string() + " --save-dtype " + dtype);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ifstream in(save, std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    const std::string header = bytes.substr(0, std::min<size_t>(bytes.size(), 4096));
    const std::string want = dtype == "fp32" ? "\"F32\"" : "\"BF16\"", other = dtype == "fp32" ? "\"BF16\"" : "\"F32\"";
    EXPECT_NE(header.find(want), std::string::npos) << header;
    EXPECT_EQ(header.find(other), std::string::npos) << header;
    CmdResult e = run_tandem(eval_args(save));
    EXPECT_EQ(e.exit_code, 0) << e.out;
  }
}

TEST_F(Precision, BadPrecisionFlagsAreNamed) {
  expect_error(run_tandem(train_args() + " --precision fp8"), "--precision");
  expect_error(run_tandem(train_args() + " --loss-scale 7"), "--loss-scale");
  expect_error(run_tandem(train_args() + " --clip-grad-norm -1"), "--clip-grad-norm");
  // fp16's scaler with the CPU optimizer checks the gradients on the host now: a zero1 run alone refuses.
  expect_error(run_tandem(train_args() + " --precision fp16 --optimizer-device cpu --zero 1"), "--zero 0");
  expect_error(run_tandem(train_args() + " --precision bf16 --optimizer-device cpu --offload-delay 1 --checkpoint-dir " +
                          (dir_ / "ck").string()),
               "--offload-delay 0");
}

}  // namespace
