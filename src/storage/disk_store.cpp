// DiskStore (tandem/storage/disk_store.h): the flats' images, their files, and the units'
// states: zero (never written, not read) -> resident (acquired) -> writing (released, its
// pages kept until the write and the caller's event completed) -> absent -> reading -> resident.
#include "tandem/storage/disk_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <set>
#include <fmt/format.h>
#include <mutex>

#include "tandem/error.h"
#include "tandem/profile/profiler.h"
#include "tandem/storage/io_engine.h"

namespace tandem::storage {

namespace {
constexpr const char* kOp = "disk";
constexpr size_t kPage = 4096;
using profile::now_ns;
std::atomic<int> g_files{0};

enum class St { zero, absent, reading, resident, writing };

struct Flat {
  int fd = -1;
  char* base = nullptr;
  size_t bytes = 0;  // the mapping's and the file's size (whole pages)
  size_t esize = 0;
};

struct Unit {
  int64_t begin = 0, end = 0;
  int slot = -1;  // the memory slot mapped at the unit's ranges while in memory
  St st = St::zero;
  bool acquired = false;
  uint64_t ticket = 0;
  Event after;
};
}  // namespace

struct DiskStore::Impl {
  DiskStoreOptions o;
  std::unique_ptr<IoEngine> io;
  mutable std::mutex mu;
  std::vector<Flat> flats;
  std::vector<Unit> units;
  std::deque<int> writing;  // units in write-behind, oldest first
  int window = 0;
  int64_t wait_ns = 0;  // callers blocked on the disk
  int64_t created_ns = now_ns();
  // The units' memory: slots of a memfd, each the largest unit's pages of every flat (flat f at
  // slot_offset[f]), mapped at a unit's ranges while it is in memory and unmapped after (its
  // pages stay in the memfd: a slot's next unit reuses them, no page is zero-filled again).
  int memfd = -1;
  size_t slot_bytes = 0;
  std::vector<size_t> slot_offset;
  int slots = 0;           // the memfd's size in slots
  std::set<int> free_slots;

  // A unit's page-rounded piece of flat f: [a, a + len) of the flat's bytes.
  std::pair<size_t, size_t> piece(const Unit& x, const Flat& f) const {
    const size_t a = static_cast<size_t>(x.begin) * f.esize;
    const size_t b = std::min((static_cast<size_t>(x.end) * f.esize + kPage - 1) / kPage * kPage, f.bytes);
    return {a, b > a ? b - a : 0};
  }

  // Under mu: a free slot, after the oldest writes ended, else a new one.
  int take_slot() {
    while (free_slots.empty() && evict_oldest(true)) {
    }
    if (!free_slots.empty()) {
      const int s = *free_slots.begin();
      free_slots.erase(free_slots.begin());
      return s;
    }
    TD_CHECK(::ftruncate(memfd, static_cast<off_t>((slots + 1) * slot_bytes)) == 0, ErrorCode::out_of_memory, kOp,
             "cannot grow the disk tier's memory to {} slots of {} bytes: {}", slots + 1, slot_bytes,
             std::strerror(errno));
    return slots++;
  }
  // Under mu: slot `s` free again; the memfd's free top slots beyond the window go back.
  void free_slot(int s) {
    free_slots.insert(s);
    while (slots > window && free_slots.count(slots - 1)) {
      free_slots.erase(slots - 1);
      --slots;
      ::ftruncate(memfd, static_cast<off_t>(slots * slot_bytes));
    }
  }
  // Under mu: maps a slot at unit x's ranges (zeroed for a unit never written).
  void map_in(Unit& x, bool zero) {
    x.slot = take_slot();
    for (size_t f = 0; f < flats.size(); ++f) {
      const auto [a, len] = piece(x, flats[f]);
      if (len == 0) continue;
      void* p = ::mmap(flats[f].base + a, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE, memfd,
                       static_cast<off_t>(static_cast<size_t>(x.slot) * slot_bytes + slot_offset[f]));
      TD_CHECK(p != MAP_FAILED, ErrorCode::out_of_memory, kOp, "cannot map {} bytes of the disk tier: {}", len,
               std::strerror(errno));
      if (zero) std::memset(p, 0, len);
    }
  }
  // Under mu: unmaps unit x's slot (its ranges become empty reserved memory) and frees it.
  void map_out(Unit& x) {
    for (const Flat& f : flats) {
      const auto [a, len] = piece(x, f);
      if (len > 0)
        ::mmap(f.base + a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    }
    free_slot(x.slot);
    x.slot = -1;
  }

  // Under mu: runs `wait`, counting its time as waiting for the disk.
  template <class F>
  void waiting(F&& wait) {
    const int64_t t0 = now_ns();
    wait();
    wait_ns += now_ns() - t0;
  }

  int in_memory() const {
    int n = 0;
    for (const Unit& x : units) n += x.st == St::reading || x.st == St::resident || x.st == St::writing;
    return n;
  }

  std::vector<IoRegion> regions(const Unit& x, bool write) const {
    std::vector<IoRegion> out;
    for (const Flat& f : flats) {
      const size_t a = static_cast<size_t>(x.begin) * f.esize;
      const size_t b = std::min(static_cast<size_t>(x.end) * f.esize, f.bytes);
      if (b <= a) continue;
      const size_t len = (b - a + kPage - 1) / kPage * kPage;  // the last unit ends on the page
      out.push_back({f.fd, f.base + a, len, a, write});
    }
    return out;
  }

  // Under mu: the write of the oldest writing unit ended (waits for it when `block`) and its
  // pages go back. Returns false when it was not done (block false) or none writes.
  bool evict_oldest(bool block) {
    if (writing.empty()) return false;
    Unit& x = units[static_cast<size_t>(writing.front())];
    if (!block && (!io->done(x.ticket) || !x.after.query())) return false;
    writing.pop_front();
    const Event after = x.after;
    x.st = St::absent;
    x.after = Event();
    const uint64_t t = x.ticket;
    x.ticket = 0;
    waiting([&] {
      after.synchronize();
      io->wait(t);  // throws a failed write
    });
    map_out(x);
    return true;
  }
  void sweep() {
    while (evict_oldest(false)) {
    }
  }

  // Under mu: unit x (absent) starts reading.
  void start_read(Unit& x) {
    map_in(x, false);
    x.ticket = io->submit(regions(x, false));
    x.st = St::reading;
  }

  // Under mu: unit u in memory, whatever its state.
  void bring(int u) {
    Unit& x = units[static_cast<size_t>(u)];
    if (x.st == St::writing) {  // its pages are still there: the write must end first
      writing.erase(std::find(writing.begin(), writing.end(), u));
      const uint64_t t = x.ticket;
      x.ticket = 0;
      x.after = Event();
      x.st = St::resident;
      waiting([&] { io->wait(t); });
      return;
    }
    if (x.st == St::absent) start_read(x);
    if (x.st == St::reading) {
      const uint64_t t = x.ticket;
      x.ticket = 0;
      x.st = St::resident;
      waiting([&] { io->wait(t); });
    }
    if (x.st == St::zero) map_in(x, true);  // never written: zeros, no read
    x.st = St::resident;
  }

  Unit& checked(int u) {
    TD_CHECK_ARG(u >= 0 && u < static_cast<int>(units.size()), kOp, "unit {} of {}", u, units.size());
    return units[static_cast<size_t>(u)];
  }
};

DiskStore::DiskStore(DiskStoreOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = std::move(options);
  TD_CHECK_ARG(m.o.read_ahead >= 0, kOp, "read_ahead must be >= 0, got {}", m.o.read_ahead);
  TD_CHECK_ARG(m.o.window >= 0, kOp, "window must be >= 0, got {}", m.o.window);
  m.window = m.o.window > 0 ? m.o.window : m.o.read_ahead + 3;
  m.io = std::make_unique<IoEngine>(m.o.queue_depth, m.o.request_bytes, m.o.force_threads);
  m.io->set_model(m.o.model_read_gbps, m.o.model_write_gbps);
}

DiskStore::~DiskStore() {
  Impl& m = *impl_;
  for (Unit& x : m.units) {
    try {
      x.after.synchronize();
      m.io->wait(x.ticket);
    } catch (...) {  // nobody left to report to
    }
  }
  m.io.reset();
  for (const Flat& f : m.flats) {
    if (f.base) ::munmap(f.base, f.bytes);
    if (f.fd >= 0) ::close(f.fd);
  }
  if (m.memfd >= 0) ::close(m.memfd);
}

Tensor DiskStore::add_flat(int64_t numel, DType dtype, const std::string& name) {
  Impl& m = *impl_;
  TD_CHECK_ARG(m.units.empty(), kOp, "add_flat after set_units");
  TD_CHECK_ARG(numel >= 0, kOp, "numel must be >= 0, got {}", numel);
  Flat f;
  f.esize = dtype_size(dtype);
  f.bytes = std::max<size_t>((static_cast<size_t>(numel) * f.esize + kPage - 1) / kPage * kPage, kPage);
  const std::string path =
      fmt::format("{}/tandem-{}-{}-{}.state", m.o.dir, ::getpid(), g_files.fetch_add(1), name);
  f.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
  TD_CHECK(f.fd >= 0, ErrorCode::io, kOp, "cannot create {}: {}", path, std::strerror(errno));
  ::unlink(path.c_str());  // scratch: gone with the last descriptor, even after kill -9
  int rc = ::posix_fallocate(f.fd, 0, static_cast<off_t>(f.bytes));
  if (rc == EOPNOTSUPP || rc == EINVAL) rc = ::ftruncate(f.fd, static_cast<off_t>(f.bytes)) == 0 ? 0 : errno;
  if (rc != 0) {
    ::close(f.fd);
    throw_error(ErrorCode::io, kOp,
                fmt::format("cannot size {} to {} bytes: {}", path, f.bytes, std::strerror(rc)));
  }
  void* p = ::mmap(nullptr, f.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    ::close(f.fd);
    throw_error(ErrorCode::out_of_memory, kOp,
                fmt::format("cannot reserve {} bytes of address space: {}", f.bytes, std::strerror(errno)));
  }
  f.base = static_cast<char*>(p);
  m.flats.push_back(f);
  return Tensor::from_blob(p, {numel}, dtype);
}

void DiskStore::set_units(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  TD_CHECK_ARG(m.units.empty(), kOp, "set_units called twice");
  int64_t at = 0;
  for (const auto& [b, e] : ranges) {
    TD_CHECK_ARG(b >= at && e >= b && b % kUnitAlign == 0, kOp,
                 "unit [{}, {}): expected ascending, disjoint ranges starting on multiples of {} elements", b, e,
                 kUnitAlign);
    Unit x;
    x.begin = b;
    x.end = e;
    m.units.push_back(x);
    at = e;
  }
  // The slots' layout: per flat, the largest unit's piece.
  m.slot_offset.assign(m.flats.size(), 0);
  for (size_t f = 0; f < m.flats.size(); ++f) {
    size_t largest = 0;
    for (const Unit& x : m.units) largest = std::max(largest, m.piece(x, m.flats[f]).second);
    m.slot_offset[f] = m.slot_bytes;
    m.slot_bytes += largest;
  }
  m.slot_bytes = std::max(m.slot_bytes, kPage);
  m.memfd = ::memfd_create("tandem-disk-tier", MFD_CLOEXEC);
  TD_CHECK(m.memfd >= 0, ErrorCode::out_of_memory, kOp, "memfd_create failed: {}", std::strerror(errno));
}

int DiskStore::units() const { return static_cast<int>(impl_->units.size()); }

void DiskStore::acquire(int u) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  Unit& x = m.checked(u);
  m.sweep();
  m.bring(u);
  x.acquired = true;
  const int n = static_cast<int>(m.units.size());
  for (int j = 1; j <= m.o.read_ahead && j < n; ++j) {
    Unit& y = m.units[static_cast<size_t>((u + j) % n)];
    if (y.st != St::absent) continue;
    if (m.in_memory() >= m.window) m.sweep();
    if (m.in_memory() >= m.window) break;
    m.start_read(y);
  }
}

void DiskStore::release(int u, const Event& after) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  Unit& x = m.checked(u);
  TD_CHECK_ARG(x.acquired && x.st == St::resident, kOp, "release of unit {}, which was not acquired", u);
  x.acquired = false;
  x.ticket = m.io->submit(m.regions(x, true));
  x.after = after;
  x.st = St::writing;
  m.writing.push_back(u);
  m.sweep();
  while (m.in_memory() > m.window && m.evict_oldest(true)) {
  }
}

void DiskStore::acquire_all() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  for (Unit& x : m.units)
    if (x.st == St::absent) m.start_read(x);
  for (size_t u = 0; u < m.units.size(); ++u) {
    m.bring(static_cast<int>(u));
    m.units[u].acquired = true;
  }
}

void DiskStore::release_all() {
  for (int u = 0; u < units(); ++u) {
    bool held = false;
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      held = impl_->units[static_cast<size_t>(u)].acquired;
    }
    if (held) release(u);
  }
  std::lock_guard<std::mutex> lk(impl_->mu);
  while (impl_->evict_oldest(true)) {
  }
}

uint64_t DiskStore::disk_bytes() const {
  uint64_t n = 0;
  for (const Flat& f : impl_->flats) n += f.bytes;
  return n;
}

uint64_t DiskStore::window_bytes() const {
  const Impl& m = *impl_;
  uint64_t largest = 0;
  for (const Unit& x : m.units) {
    uint64_t b = 0;
    for (const Flat& f : m.flats) b += static_cast<uint64_t>(x.end - x.begin) * f.esize;
    largest = std::max(largest, b);
  }
  return std::min(largest * static_cast<uint64_t>(m.window), disk_bytes());
}

DiskFigures DiskStore::figures() const {
  const IoTotals t = impl_->io->totals();
  DiskFigures f;
  f.bytes_read = t.bytes_read;
  f.bytes_written = t.bytes_written;
  f.read_seconds = static_cast<double>(t.read_busy_ns) * 1e-9;
  f.write_seconds = static_cast<double>(t.write_busy_ns) * 1e-9;
  std::lock_guard<std::mutex> lk(impl_->mu);
  f.wait_seconds = static_cast<double>(impl_->wait_ns) * 1e-9;
  f.lifetime_seconds = static_cast<double>(now_ns() - impl_->created_ns) * 1e-9;
  return f;
}

std::string DiskStore::describe() const {
  const Impl& m = *impl_;
  const std::string model = m.o.model_read_gbps > 0 || m.o.model_write_gbps > 0
                                ? fmt::format("; modelled drive {:g} GB/s read, {:g} GB/s write",
                                              m.o.model_read_gbps, m.o.model_write_gbps)
                                : std::string();
  return fmt::format("{} file{}, {:.2f} GiB in {} (unlinked scratch); {}; read-ahead {}, window {} units ({:.1f} MiB){}",
                     m.flats.size(), m.flats.size() == 1 ? "" : "s", static_cast<double>(disk_bytes()) / (1 << 30),
                     m.o.dir, m.io->describe(), m.o.read_ahead, m.window,
                     static_cast<double>(window_bytes()) / (1 << 20), model);
}

}  // namespace tandem::storage
