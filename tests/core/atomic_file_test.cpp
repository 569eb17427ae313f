// AtomicFile: the target is replaced only by complete contents; an uncommitted file (error,
// exception) and a signal during the write leave no temporary file and the old target intact;
// a file that happens to have the temporary name is not touched; errors name the path and the
// system's reason.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "data/temp_dir.h"
#include "tandem/atomic_file.h"
#include "tandem/error.h"

using namespace tandem;
namespace fs = std::filesystem;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_plain(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

int files_in(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// Runs `body` in a forked child (which ends with _exit(0) if body returns) and returns the
// child's wait status.
template <typename Body>
int in_child(const Body& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = -1;
  if (child > 0) ::waitpid(child, &status, 0);
  return status;
}

TEST(AtomicFile, CommitReplacesTheTargetWithTheWholeContents) {
  tandem::testing::TempDir dir;
  const std::string path = dir.file("out.bin");
  write_plain(path, "old");
  {
    AtomicFile f(path, "test");
    EXPECT_EQ(f.temp_path(), path + ".tmp-" + std::to_string(::getpid()));
    f.write("new ", 4);
    EXPECT_EQ(read(path), "old");  // untouched until commit
    f.write("contents", 8);
    f.commit();
  }
  EXPECT_EQ(read(path), "new contents");
  EXPECT_EQ(files_in(dir.str()), 1);
}

TEST(AtomicFile, UncommittedFileLeavesTheTargetAndNoTemporary) {
  tandem::testing::TempDir dir;
  const std::string path = dir.file("out.bin");
  write_plain(path, "old");
  try {
    AtomicFile f(path, "test");
    f.write("partial", 7);
    throw std::runtime_error("stopped");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(files_in(dir.str()), 1);
}

TEST(AtomicFile, FileWithTheTemporaryNameIsNotTouched) {
  tandem::testing::TempDir dir;
  const std::string path = dir.file("out.bin");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  write_plain(tmp, "user data");
  try {
    AtomicFile f(path, "test");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    const std::string what = e.what();
    EXPECT_NE(what.find("[test] " + path + ": cannot create the temporary file " + tmp + ": File exists"),
              std::string::npos)
        << what;
  }
  EXPECT_EQ(read(tmp), "user data");
  EXPECT_FALSE(fs::exists(path));
}

TEST(AtomicFile, MissingFolderIsNamedWithTheReason) {
  tandem::testing::TempDir dir;
  const std::string path = dir.file("no-such-folder/out.bin");
  try {
    AtomicFile f(path, "test");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": cannot create the temporary file"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(AtomicFile, SpecialFileOrFolderAtThePathIsRefusedAndLeftAlone) {
  tandem::testing::TempDir dir;
  const std::string fifo = dir.file("pipe.png"), folder = dir.file("folder.png");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_directory(folder);
  for (const auto& [path, found] : {std::pair{fifo, "a special file"}, std::pair{folder, "a folder"}}) {
    try {
      AtomicFile f(path, "test");
      ADD_FAILURE() << "expected an error for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::io);
      EXPECT_NE(std::string(e.what()).find(path + ": expected a regular file path, found " + found), std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(fifo));  // the node itself, not replaced by a regular file
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_EQ(files_in(dir.str()), 2);  // no temporary left
}

TEST(AtomicFile, SignalDuringTheWriteRemovesTheTemporaryAndEndsTheProcess) {
  for (int sig : {SIGTERM, SIGINT}) {
    tandem::testing::TempDir dir;
    const std::string path = dir.file("out.bin");
    write_plain(path, "old");
    const int status = in_child([&] {
      AtomicFile f(path, "test");
      f.write("partial", 7);
      ::raise(sig);  // as if Ctrl-C arrived mid-write
      ::_exit(3);    // not reached: the default action ends the process
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig << " status " << status;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_EQ(read(path), "old");
    EXPECT_EQ(files_in(dir.str()), 1) << "signal " << sig;
  }
}

TEST(AtomicFile, IgnoredSignalStaysIgnoredAndTheWriteCompletes) {
  // Under nohup SIGHUP is ignored: closing the terminal mid-save must not lose the file.
  tandem::testing::TempDir dir;
  const std::string path = dir.file("out.bin");
  const int status = in_child([&] {
    ::signal(SIGHUP, SIG_IGN);
    AtomicFile f(path, "test");
    f.write("complete", 8);
    ::raise(SIGHUP);
    f.commit();
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read(path), "complete");
  EXPECT_EQ(files_in(dir.str()), 1);
}

TEST(AtomicFile, ReplacementKeepsThePermissions) {
  tandem::testing::TempDir dir;
  const std::string path = dir.file("private.bin");
  write_plain(path, "old");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  AtomicFile f(path, "test");
  f.write("new", 3);
  f.commit();
  EXPECT_EQ(fs::status(path).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(read(path), "new");
}

TEST(AtomicFile, HandlersAreRestoredAfterTheWrite) {
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  tandem::testing::TempDir dir;
  {
    AtomicFile f(dir.file("a"), "test");
    struct sigaction during {};
    ::sigaction(SIGTERM, nullptr, &during);
    EXPECT_NE(during.sa_handler, before.sa_handler);
    f.commit();
  }
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

}  // namespace
