// IoEngine (tandem/storage/io_engine.h): the queued requests (reads before writes), served by an io_uring thread
// or by a pool of pread/pwrite threads.
#include "tandem/storage/io_engine.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "tandem/error.h"
#include "tandem/profile/profiler.h"

#if TANDEM_HAVE_LIBURING
#include <liburing.h>
#endif

namespace tandem::storage {

namespace {
constexpr const char* kOp = "disk";
namespace prof = tandem::profile;

struct Request {
  IoRegion r;
  uint64_t ticket = 0;
};

struct Ticket {
  size_t left = 0;
  std::string error;
};
}  // namespace

struct IoEngine::Impl {
  int depth = 1;
  size_t request_bytes = 0;
  bool use_uring = false;
  std::string uring_refusal;
#if TANDEM_HAVE_LIBURING
  io_uring ring{};
#endif
  mutable std::mutex mu;
  std::condition_variable work_cv, done_cv;
  // The requests not yet started, per direction (0 read, 1 write): reads go first, since a
  // caller waits for a read before it can work (the disk store's acquire) while a write runs
  // behind the work (write-behind). A unit is read only after its write ended, so the order
  // of a read and a write of the same bytes never changes.
  std::deque<Request> queue[2];
  bool any_queued() const { return !queue[0].empty() || !queue[1].empty(); }
  Request pop() {
    std::deque<Request>& d = queue[0].empty() ? queue[1] : queue[0];
    Request q = d.front();
    d.pop_front();
    return q;
  }
  std::unordered_map<uint64_t, Ticket> tickets;
  uint64_t next_ticket = 1;
  bool stopping = false;
  IoTotals totals;
  int in_flight[2] = {0, 0};  // per direction (0 read, 1 write)
  int64_t busy_since[2] = {0, 0};
  std::vector<std::thread> threads;
  double model_gbps[2] = {0, 0};  // set_model
  int64_t model_free_ns = 0;      // when the modelled drive is free

  // Under mu (held by `lk`): a modelled drive makes request `q` (which just completed) wait
  // until its modelled end; releases the lock while sleeping.
  void model_delay(const Request& q, std::unique_lock<std::mutex>& lk) {
    const double gbps = model_gbps[q.r.write];
    if (gbps <= 0) return;
    const int64_t now = prof::now_ns();
    const auto cost = static_cast<int64_t>(static_cast<double>(q.r.len) / gbps);  // bytes / (GB/s) = ns
    model_free_ns = std::max(model_free_ns, now - cost) + cost;
    const int64_t due = model_free_ns;
    lk.unlock();
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(0, due - now)));
    lk.lock();
  }

  // Under mu: a request of direction `w` starts / ends.
  void started(bool w) {
    if (in_flight[w]++ == 0) busy_since[w] = prof::now_ns();
  }
  void ended(const Request& q, ssize_t res, int err) {
    const bool w = q.r.write;
    if (--in_flight[w] == 0) {
      const int64_t t1 = prof::now_ns();
      (w ? totals.write_busy_ns : totals.read_busy_ns) += t1 - busy_since[w];
      auto& p = prof::Profiler::global();
      if (p.enabled())
        p.record(prof::Stage::other, w ? "disk write" : "disk read", busy_since[w], t1);
    }
    Ticket& t = tickets[q.ticket];
    if (res != static_cast<ssize_t>(q.r.len) && t.error.empty())
      t.error = res < 0 ? fmt::format("{} of {} bytes at offset {} failed: {}", w ? "write" : "read", q.r.len,
                                      q.r.offset, std::strerror(err))
                        : fmt::format("{} of {} bytes at offset {} moved {} bytes", w ? "write" : "read", q.r.len,
                                      q.r.offset, res);
    if (res > 0) (w ? totals.bytes_written : totals.bytes_read) += static_cast<uint64_t>(res);
    ++totals.requests;
    if (--t.left == 0) done_cv.notify_all();
  }

  static ssize_t blocking_io(const IoRegion& r, int& err) {
    size_t done = 0;
    auto* p = static_cast<char*>(r.buf);
    while (done < r.len) {
      const ssize_t n = r.write ? ::pwrite(r.fd, p + done, r.len - done, static_cast<off_t>(r.offset + done))
                                : ::pread(r.fd, p + done, r.len - done, static_cast<off_t>(r.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err = errno;
        return n < 0 ? n : static_cast<ssize_t>(done);
      }
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
  }

  void pool_loop(int i) {
    prof::Profiler::global().name_this_thread(fmt::format("disk io {}", i));
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      work_cv.wait(lk, [&] { return stopping || any_queued(); });
      if (!any_queued()) return;  // stopping
      const Request q = pop();
      started(q.r.write);
      lk.unlock();
      int err = 0;
      const ssize_t res = blocking_io(q.r, err);
      lk.lock();
      model_delay(q, lk);
      ended(q, res, err);
    }
  }

#if TANDEM_HAVE_LIBURING
  void uring_loop() {
    prof::Profiler::global().name_this_thread("disk io");
    int inflight = 0;
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      if (inflight == 0) work_cv.wait(lk, [&] { return stopping || any_queued(); });
      if (inflight == 0 && !any_queued()) return;  // stopping, nothing left
      int queued = 0;
      while (inflight < depth && any_queued()) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (!sqe) break;
        auto* q = new Request(pop());
        if (q->r.write) {
          io_uring_prep_write(sqe, q->r.fd, q->r.buf, static_cast<unsigned>(q->r.len), q->r.offset);
        } else {
          io_uring_prep_read(sqe, q->r.fd, q->r.buf, static_cast<unsigned>(q->r.len), q->r.offset);
        }
        io_uring_sqe_set_data(sqe, q);
        started(q->r.write);
        ++inflight;
        ++queued;
      }
      lk.unlock();
      if (queued > 0) io_uring_submit(&ring);
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring, &cqe);
      lk.lock();
      while (rc == 0 && cqe) {
        auto* q = static_cast<Request*>(io_uring_cqe_get_data(cqe));
        const int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        --inflight;
        if (res > 0 && static_cast<size_t>(res) < q->r.len) {  // short: queue the rest first
          Request rest = *q;
          rest.r.buf = static_cast<char*>(q->r.buf) + res;
          rest.r.len -= static_cast<size_t>(res);
          rest.r.offset += static_cast<uint64_t>(res);
          tickets[q->ticket].left++;
          queue[rest.r.write].push_front(rest);
          q->r.len = static_cast<size_t>(res);
        }
        model_delay(*q, lk);
        ended(*q, res < 0 ? -1 : res, res < 0 ? -res : 0);
        delete q;
        cqe = nullptr;
        rc = io_uring_peek_cqe(&ring, &cqe);
      }
    }
  }
#endif
};

IoEngine::IoEngine(int depth, size_t request_bytes, bool force_threads) : impl_(std::make_unique<Impl>()) {
  TD_CHECK_ARG(depth >= 1 && depth <= 256, kOp, "queue depth must be in [1, 256], got {}", depth);
  TD_CHECK_ARG(request_bytes > 0 && request_bytes % 4096 == 0, kOp,
               "request size must be a positive multiple of 4096 bytes, got {}", request_bytes);
  Impl& m = *impl_;
  m.depth = depth;
  m.request_bytes = request_bytes;
  const char* env = std::getenv("TANDEM_IO");
  if (force_threads || (env && std::string(env) == "threads")) {
    m.uring_refusal = "TANDEM_IO=threads";
  } else {
#if TANDEM_HAVE_LIBURING
    const int rc = io_uring_queue_init(static_cast<unsigned>(depth), &m.ring, 0);
    if (rc == 0) {
      m.use_uring = true;
    } else {
      m.uring_refusal = fmt::format("io_uring_queue_init failed: {}", std::strerror(-rc));
    }
#else
    m.uring_refusal = "built without liburing";
#endif
  }
#if TANDEM_HAVE_LIBURING
  if (m.use_uring) {
    m.threads.emplace_back([&m] { m.uring_loop(); });
    return;
  }
#endif
  const int n = std::min(depth, 4);
  for (int i = 0; i < n; ++i) m.threads.emplace_back([&m, i] { m.pool_loop(i); });
}

IoEngine::~IoEngine() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    m.stopping = true;
  }
  m.work_cv.notify_all();
  for (std::thread& t : m.threads) t.join();
#if TANDEM_HAVE_LIBURING
  if (m.use_uring) io_uring_queue_exit(&m.ring);
#endif
}

bool IoEngine::uring() const { return impl_->use_uring; }

std::string IoEngine::describe() const {
  const Impl& m = *impl_;
  const std::string size = m.request_bytes % (1 << 20) == 0 ? fmt::format("{} MiB", m.request_bytes >> 20)
                                                            : fmt::format("{} KiB", m.request_bytes >> 10);
  if (m.use_uring) return fmt::format("io_uring, {} requests of {} in flight", m.depth, size);
  return fmt::format("pread/pwrite pool of {} threads ({}), {} requests", m.threads.size(), m.uring_refusal, size);
}

uint64_t IoEngine::submit(const std::vector<IoRegion>& regions) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  size_t n = 0;
  for (const IoRegion& r : regions) n += (r.len + m.request_bytes - 1) / m.request_bytes;
  if (n == 0) return 0;
  const uint64_t id = m.next_ticket++;
  m.tickets[id].left = n;
  for (const IoRegion& r : regions)
    for (size_t at = 0; at < r.len; at += m.request_bytes) {
      IoRegion piece = r;
      piece.buf = static_cast<char*>(r.buf) + at;
      piece.offset = r.offset + at;
      piece.len = std::min(m.request_bytes, r.len - at);
      m.queue[r.write].push_back({piece, id});
    }
  m.work_cv.notify_all();
  return id;
}

bool IoEngine::done(uint64_t ticket) const {
  if (ticket == 0) return true;
  std::lock_guard<std::mutex> lk(impl_->mu);
  const auto it = impl_->tickets.find(ticket);
  return it == impl_->tickets.end() || it->second.left == 0;
}

void IoEngine::wait(uint64_t ticket) {
  if (ticket == 0) return;
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lk(m.mu);
  const auto it = m.tickets.find(ticket);
  if (it == m.tickets.end()) return;
  m.done_cv.wait(lk, [&] { return it->second.left == 0; });
  const std::string error = it->second.error;
  m.tickets.erase(it);
  TD_CHECK(error.empty(), ErrorCode::io, kOp, "{}", error);
}

void IoEngine::set_model(double read_gbps, double write_gbps) {
  TD_CHECK_ARG(read_gbps >= 0 && write_gbps >= 0, kOp, "modelled GB/s must be >= 0, got {} and {}", read_gbps,
               write_gbps);
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->model_gbps[0] = read_gbps;
  impl_->model_gbps[1] = write_gbps;
}

IoTotals IoEngine::totals() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->totals;
}

}  // namespace tandem::storage
