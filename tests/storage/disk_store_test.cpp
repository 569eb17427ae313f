// The disk tier's store (tandem/storage/disk_store.h): units written behind and read back hold
// what was written, through io_uring and through the pread/pwrite pool; released units give
// their pages back (the window bounds the resident memory); unusable folders are refused with
// one line naming --offload-dir.
#include <gtest/gtest.h>

#include <sys/vfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/temp_dir.h"
#include "tandem/error.h"
#include "tandem/storage/disk_store.h"
#include "tandem/storage/io_engine.h"

namespace tandem::storage {
namespace {

using testing::TempDir;

// Resident pages of [p, p + bytes) (mincore would do for files; anonymous pages: /proc/self/smaps
// is per mapping, so count RSS before and after instead).
int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

void round_trip(bool threads) {
  TempDir dir;
  DiskStoreOptions o;
  o.dir = dir.str();
  o.force_threads = threads;
  o.read_ahead = 1;
  o.request_bytes = 64 << 10;  // several requests per unit
  DiskStore store(o);
  constexpr int64_t kUnit = 16 * DiskStore::kUnitAlign, kUnits = 6;
  Tensor a = store.add_flat(kUnit * kUnits, DType::f32, "a");
  Tensor b = store.add_flat(kUnit * kUnits - 5, DType::bf16, "b");  // the last unit ends inside a page
  std::vector<std::pair<int64_t, int64_t>> units;
  for (int64_t u = 0; u < kUnits; ++u) units.emplace_back(u * kUnit, std::min((u + 1) * kUnit, b.numel()));
  units.back().second = kUnit * kUnits;
  store.set_units(units);
  // The files are unlinked scratch: nothing is left in the folder.
  EXPECT_TRUE(std::filesystem::is_empty(dir.str()));
  for (int pass = 0; pass < 3; ++pass) {
    for (int u = 0; u < kUnits; ++u) {
      store.acquire(u);
      float* pa = a.data<float>() + u * kUnit;
      auto* pb = static_cast<uint16_t*>(b.raw_data()) + u * kUnit;
      for (int64_t i = 0; i < kUnit; ++i) {
        // Each pass finds the last pass's values (zeros at first), then writes its own.
        const float want = pass == 0 ? 0.0f : static_cast<float>((pass - 1) * 1000003 + u * kUnit + i);
        ASSERT_EQ(pa[i], want) << "pass " << pass << " unit " << u << " at " << i;
        pa[i] = static_cast<float>(pass * 1000003 + u * kUnit + i);
        if (u * kUnit + i < b.numel()) pb[i] = static_cast<uint16_t>(pass + u + i);
      }
      store.release(u);
    }
  }
  store.acquire_all();
  for (int u = 0; u < kUnits; ++u)
    EXPECT_EQ(static_cast<uint16_t*>(b.raw_data())[u * kUnit + 7], static_cast<uint16_t>(2 + u + 7));
  store.release_all();
  const DiskFigures f = store.figures();
  EXPECT_GT(f.bytes_written, static_cast<uint64_t>(3 * kUnits * kUnit * 6));
  EXPECT_GT(f.bytes_read, static_cast<uint64_t>(2 * kUnits * kUnit * 6 - 1));
  EXPECT_NE(store.describe().find(threads ? "pread/pwrite pool" : "io_uring"), std::string::npos) << store.describe();
}

TEST(DiskStore, UnitsReadBackWhatWasWrittenThroughIoUring) {
  IoEngine probe(2, 4096);
  if (!probe.uring()) GTEST_SKIP() << probe.describe();
  round_trip(false);
}

TEST(DiskStore, UnitsReadBackWhatWasWrittenThroughThePool) { round_trip(true); }

// 64 MiB of flats, a window of 2 units of 4 MiB: after touching every unit the resident memory
// grew by about the window, not the flats.
TEST(DiskStore, ReleasedUnitsGiveTheirPagesBack) {
  TempDir dir;
  DiskStoreOptions o;
  o.dir = dir.str();
  o.read_ahead = 0;
  o.window = 2;
  DiskStore store(o);
  constexpr int64_t kUnit = 1 << 20, kUnits = 16;  // 4 MiB of f32 each
  Tensor a = store.add_flat(kUnit * kUnits, DType::f32, "a");
  std::vector<std::pair<int64_t, int64_t>> units;
  for (int64_t u = 0; u < kUnits; ++u) units.emplace_back(u * kUnit, (u + 1) * kUnit);
  store.set_units(units);
  const int64_t before = rss_bytes();
  for (int u = 0; u < kUnits; ++u) {
    store.acquire(u);
    std::memset(a.data<float>() + u * kUnit, 1, kUnit * 4);
    store.release(u);
  }
  EXPECT_LT(rss_bytes() - before, 3 * 4 * kUnit + (4 << 20)) << "the window is 2 units of 4 MiB";
  EXPECT_EQ(store.disk_bytes(), static_cast<uint64_t>(kUnit * kUnits * 4));
  store.acquire(5);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(a.data<float>() + 5 * kUnit)[123], 1);
  store.release(5);
}

std::string refusal(const std::string& dir, uint64_t need) {
  try {
    check_offload_dir(dir, need);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(OffloadDir, UnusableFoldersAreRefusedWithOneLine) {
  TempDir dir;
  EXPECT_EQ(refusal(dir.str(), 1 << 20), "");
  const std::string missing = refusal(dir.file("nope"), 0);
  EXPECT_NE(missing.find("--offload-dir " + dir.file("nope") + ": No such file"), std::string::npos) << missing;
  std::ofstream(dir.file("plain")) << "x";
  EXPECT_NE(refusal(dir.file("plain"), 0).find("not a folder"), std::string::npos);
  const std::string huge = refusal(dir.str(), uint64_t{1} << 62);
  EXPECT_NE(huge.find("free, the disk tier's files need"), std::string::npos) << huge;
  // Read-only: /proc refuses new files even to root.
  EXPECT_NE(refusal("/proc", 0).find("not writable"), std::string::npos) << refusal("/proc", 0);
  // tmpfs is memory, not a disk (it takes O_DIRECT since Linux 6.6).
  struct statfs s {};
  if (::statfs("/dev/shm", &s) == 0 && s.f_type == 0x01021994 /* TMPFS_MAGIC */) {
    const std::string shm = refusal("/dev/shm", 0);
    EXPECT_NE(shm.find("a memory file system (tmpfs), not a disk"), std::string::npos) << shm;
  }
  for (const std::string& line : {missing, huge}) EXPECT_EQ(line.find('\n'), std::string::npos) << line;
}

}  // namespace
}  // namespace tandem::storage
