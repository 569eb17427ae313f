// End-to-end tests of run files (`tandem train --config run.toml`, `--print-config`): a file
// gives the same resolved configuration and the same per-epoch figures as the equivalent flags,
// flags override it, the checkpoint records the resolved configuration, and a bad key, a value
// of the wrong type, a missing file or a TOML syntax error is one line naming the file and key.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/checkpoint/checkpoint_file.h"
#include "train/idx_split.h"
#include "train/run_tandem.h"

namespace fs = std::filesystem;
using tandem::testing::CmdResult;
using tandem::testing::run_tandem;
using tandem::testing::write_split;

namespace {

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_config_file_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    write_split(dir_ / "data", "train", 384, false, 1);
    write_split(dir_ / "data", "t10k", 128, false, 2);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // The run: 1 epoch of the mlp on the small split, one compute thread, no progress bar.
  std::string flags() const {
    return "--data " + (dir_ / "data").string() +
           " --model mlp --epochs 1 --batch-size 32 --lr 0.01 --optimizer sgd --momentum 0.8 "
           "--nesterov "
           "--no-augment --mean 0.25 --std 0.5 --num-workers auto --threads 1 --progress 0";
  }
  std::string toml() const {
    return "data = '" + (dir_ / "data").string() +
           "'\n"
           "model = 'mlp'\nepochs = 1\nbatch_size = 32\nlr = 0.01\noptimizer = \"sgd\"\nmomentum = "
           "0.8\n"
           "nesterov = true\nno_augment = true\nmean = [0.25]\nstd = [0.5]\nnum_workers = 'auto'\n"
           "threads = 1\nprogress = 0\n";
  }
  // Bad input: exit code 2 and exactly one line, "tandem: error: [config] ...", holding `needle`.
  void expect_one_line(const std::string& args, const std::string& needle) const {
    const CmdResult r = run_tandem("train " + args);
    EXPECT_FALSE(r.signaled) << args;
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("tandem: error: [config] ", 0), 0u) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "expected one line, got:\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.out;
  }
  fs::path dir_;
};

// The "epoch 1/1 ..." line up to the test accuracy (the speed after it varies).
std::string epoch_figures(const std::string& out) {
  std::istringstream in(out);
  std::string line, found;
  while (std::getline(in, line))
    if (line.rfind("epoch 1/1 ", 0) == 0) found = line;
  const size_t acc = found.find("test_acc ");
  if (acc == std::string::npos) return "";
  return found.substr(0, found.find(' ', acc + 9));
}

std::string value_line(const std::string& config, const std::string& key) {
  std::istringstream in(config);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + " = ", 0) == 0) return line;
  return "";
}

TEST_F(ConfigFile, FileGivesTheSameConfigurationAndFiguresAsFlags) {
  const std::string file = write("run.toml", toml());
  const CmdResult by_flags = run_tandem("train " + flags() + " --print-config", "2>&1");
  const CmdResult by_file = run_tandem("train --config " + file + " --print-config", "2>&1");
  ASSERT_EQ(by_flags.exit_code, 0) << by_flags.out;
  ASSERT_EQ(by_file.exit_code, 0) << by_file.out;
  EXPECT_EQ(by_file.out, by_flags.out);
  EXPECT_EQ(value_line(by_file.out, "batch_size"), "batch_size = 32");
  EXPECT_EQ(value_line(by_file.out, "lr"), "lr = 0.01");
  EXPECT_EQ(value_line(by_file.out, "nesterov"), "nesterov = true");
  EXPECT_EQ(value_line(by_file.out, "mean"), "mean = [0.25]");
  EXPECT_EQ(value_line(by_file.out, "num_workers"), "num_workers = 'auto'");
  EXPECT_EQ(value_line(by_file.out, "weight_decay"), "weight_decay = 0.05");  // a default
  // The printed configuration is a run file that resolves to itself.
  const std::string printed = write("printed.toml", by_file.out);
  const CmdResult again = run_tandem("train --config " + printed + " --print-config", "2>&1");
  EXPECT_EQ(again.out, by_file.out);

  // The same training: identical epoch figures from the flags, the file and the printed file.
  const CmdResult a = run_tandem("train " + flags());
  const CmdResult b = run_tandem("train --config " + file);
  const CmdResult c = run_tandem("train --config " + printed);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  ASSERT_EQ(c.exit_code, 0) << c.out;
  ASSERT_NE(epoch_figures(a.out), "") << a.out;
  EXPECT_EQ(epoch_figures(b.out), epoch_figures(a.out));
  EXPECT_EQ(epoch_figures(c.out), epoch_figures(a.out));
  // Another learning rate changes them: the comparison can fail.
  const CmdResult d = run_tandem("train --config " + file + " --lr 0.05");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_NE(epoch_figures(d.out), epoch_figures(a.out));
}

TEST_F(ConfigFile, CommandLineOverridesTheFile) {
  const std::string file = write("run.toml", toml());
  const CmdResult r =
      run_tandem("train --config " + file + " --lr 0.5 --batch-size 64 --mean 0.1 --print-config");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(value_line(r.out, "lr"), "lr = 0.5");
  EXPECT_EQ(value_line(r.out, "batch_size"), "batch_size = 64");
  EXPECT_EQ(value_line(r.out, "mean"), "mean = [0.1]");
  EXPECT_EQ(value_line(r.out, "momentum"), "momentum = 0.8");  // from the file
  EXPECT_EQ(value_line(r.out, "model"), "model = 'mlp'");
}

TEST_F(ConfigFile, CheckpointRecordsTheResolvedConfiguration) {
  const std::string file = write("run.toml", toml());
  const fs::path ck = dir_ / "ck";
  const std::string extra = " --checkpoint-dir " + ck.string() + " --lr 0.02";
  const CmdResult printed =
      run_tandem("train --config " + file + extra + " --print-config", "2>&1");
  ASSERT_EQ(printed.exit_code, 0) << printed.out;
  EXPECT_FALSE(fs::exists(ck / "latest.json")) << "--print-config must not train";
  const CmdResult r = run_tandem("train --config " + file + extra);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json latest = nlohmann::json::parse(std::ifstream(ck / "latest.json"));
  const auto f = tandem::train::checkpoint::read_checkpoint_file(
      (ck / latest.at("checkpoint").get<std::string>()).string());
  EXPECT_EQ(f.state.at("run_config").get<std::string>(), printed.out);
  EXPECT_EQ(value_line(printed.out, "lr"), "lr = 0.02");
}

// A run file is read only when it is a regular file of at most 1 MiB: a directory, a FIFO (which
// would block the read) and /dev/zero (which never ends) are refused before anything is read.
TEST_F(ConfigFile, OnlyRegularFilesOfBoundedSizeAreRead) {
  expect_one_line("--config " + dir_.string(), dir_.string() + ": not a regular file: expected a TOML run file");
  const fs::path fifo = dir_ / "run.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_one_line("--config " + fifo.string(), "not a regular file");
  expect_one_line("--config /dev/zero", "/dev/zero: not a regular file");
  const std::string big = write("big.toml", "# " + std::string(2 << 20, 'x') + "\n");
  expect_one_line("--config " + big, "bytes: expected a TOML run file of at most 1048576 bytes");
  expect_one_line("--config " + (dir_ / "none.toml").string(), "none.toml: cannot read: No such file or directory");
}

TEST_F(ConfigFile, BadFilesAreOneLineNamingFileAndKey) {
  struct Case {
    const char* name;
    const char* text;
    const char* needle;  // after "<path>"
  };
  const Case cases[] = {
      {"key.toml", "epochs = 1\nbatch-size = 64\n",
       ":2: key 'batch-size': unknown key: expected the name of a `tandem train` flag with _ for - "
       "('batch_size')"},
      {"unknown.toml", "# a comment\nlearning_rate = 0.1\n",
       ":2: key 'learning_rate': unknown key"},
      {"section.toml", "lr = 0.1\n[train]\nepochs = 1\n",
       ":2: key 'train': run files have no sections"},
      {"type.toml", "lr = 0.1\nepochs = \"two\"\n",
       ":2: key 'epochs': expected an integer, got a string"},
      {"flag.toml", "nesterov = 1\n", ":1: key 'nesterov': expected true or false, got an integer"},
      {"list.toml", "mean = 0.5\n", ":1: key 'mean': expected an array of numbers, got a float"},
      {"range.toml", "epochs = 3000000000\n", ":1: key 'epochs': --epochs cannot hold 3000000000"},
      {"text.toml", "model = 5\n", ":1: key 'model': expected a string, got an integer"},
      {"syntax.toml", "epochs = 1\nlr = \n", ":2:6: TOML syntax error: "},
      {"duplicate.toml", "epochs = 1\nepochs = 2\n", ":2:"},
      // A value the flag itself refuses names the flag and the file.
      {"refused.toml", "seed = -1\n", ":1: key 'seed': --seed: expected a decimal integer >= 0"},
  };
  for (const Case& c : cases) {
    const std::string path = write(c.name, c.text);
    expect_one_line("--config " + path, path + c.needle);
  }
  const std::string missing = (dir_ / "missing.toml").string();
  expect_one_line("--config " + missing, missing + ": cannot read: No such file or directory");
}

}  // namespace
