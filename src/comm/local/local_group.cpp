// LocalGroup: ranks as threads of one process (tandem/comm/local.h). Each operation is a
// rendezvous in two phases: every rank posts its buffers and arrives (phase 1), then reads
// the others' buffers into a result of its own and arrives again (phase 2: nobody reads any
// more) before writing its output, so in-place operations never race.
#include "tandem/comm/local.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "comm/comm_util.h"

namespace tandem::comm {

struct LocalGroup::State {
  int n = 1;
  std::mutex mu;
  std::condition_variable cv;
  int64_t generation = 0;
  int arrived = 0;
  std::vector<char> present;          // ranks arrived at the current generation
  std::vector<const void*> posted;    // per rank: the buffer it reads from
  bool broken = false;
  std::string why;

  // Blocks until all n ranks arrived; throws Error(distributed) naming the missing ranks after
  // `timeout` seconds (and breaks the group, so every waiting and later rank throws too).
  void arrive(int rank, const char* op, double timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (broken) throw_error(ErrorCode::distributed, kOp, why);
    const int64_t gen = generation;
    present[static_cast<size_t>(rank)] = 1;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      std::fill(present.begin(), present.end(), 0);
      cv.notify_all();
      return;
    }
    const bool ok = cv.wait_for(lock, std::chrono::duration<double>(timeout),
                                [&] { return generation != gen || broken; });
    if (ok && generation != gen) return;
    if (!broken) {
      std::string missing;
      int count = 0;
      for (int r = 0; r < n; ++r) {
        if (present[static_cast<size_t>(r)]) continue;
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ++count;
      }
      broken = true;
      why = fmt::format("rank {}: {} got no answer within {:g} s from {} {}: that rank died, hangs or issued "
                        "another operation; expected every rank to join",
                        rank, op, timeout, count == 1 ? "rank" : "ranks", missing);
      cv.notify_all();
    }
    throw_error(ErrorCode::distributed, kOp, why);
  }
};

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup::State> s, int rank, double timeout) : s_(std::move(s)), rank_(rank) {
    set_timeout_seconds(timeout);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return s_->n; }
  const char* backend() const override { return "local"; }

  void all_reduce(const Tensor& buf, ReduceOp op, const Stream& stream) override {
    check_buffer(buf, "all_reduce buf", true);
    stream.enqueue_host([this, buf, op] {
      std::vector<float> acc(static_cast<size_t>(buf.numel()), 0.0f);
      meet(buf.raw_data(), "all_reduce", [&](const std::vector<const void*>& in) {
        for (const void* p : in) accumulate_f32(acc.data(), p, buf.dtype(), buf.numel());
      });
      done_phase("all_reduce");
      store_from_f32(buf.raw_data(), acc.data(), buf.dtype(), buf.numel(), op, s_->n);
    });
  }

  void broadcast(const Tensor& buf, int root, const Stream& stream) override {
    check_buffer(buf, "broadcast buf", false);
    TD_CHECK_ARG(root >= 0 && root < s_->n, kOp, "broadcast: root {} outside [0, {})", root, s_->n);
    stream.enqueue_host([this, buf, root] {
      std::vector<char> copy(buf.nbytes());
      meet(buf.raw_data(), "broadcast", [&](const std::vector<const void*>& in) {
        if (rank_ != root) std::memcpy(copy.data(), in[static_cast<size_t>(root)], copy.size());
      });
      done_phase("broadcast");
      if (rank_ != root) std::memcpy(buf.raw_data(), copy.data(), copy.size());
    });
  }

  void all_gather(const Tensor& send, const Tensor& recv, const Stream& stream) override {
    check_buffer(send, "all_gather send", false);
    check_buffer(recv, "all_gather recv", false);
    check_blocks(send, recv, s_->n, false, "all_gather");
    stream.enqueue_host([this, send, recv] {
      const size_t block = send.nbytes();
      std::vector<char> out(block * static_cast<size_t>(s_->n));
      meet(send.raw_data(), "all_gather", [&](const std::vector<const void*>& in) {
        for (size_t r = 0; r < in.size(); ++r) std::memcpy(out.data() + r * block, in[r], block);
      });
      done_phase("all_gather");
      std::memcpy(recv.raw_data(), out.data(), out.size());
    });
  }

  void reduce_scatter(const Tensor& send, const Tensor& recv, ReduceOp op, const Stream& stream) override {
    check_buffer(send, "reduce_scatter send", true);
    check_buffer(recv, "reduce_scatter recv", true);
    check_blocks(send, recv, s_->n, true, "reduce_scatter");
    stream.enqueue_host([this, send, recv, op] {
      const int64_t n = recv.numel();
      const size_t offset = static_cast<size_t>(n * rank_) * dtype_size(send.dtype());
      std::vector<float> acc(static_cast<size_t>(n), 0.0f);
      meet(send.raw_data(), "reduce_scatter", [&](const std::vector<const void*>& in) {
        for (const void* p : in) accumulate_f32(acc.data(), static_cast<const char*>(p) + offset, send.dtype(), n);
      });
      done_phase("reduce_scatter");
      store_from_f32(recv.raw_data(), acc.data(), recv.dtype(), n, op, s_->n);
    });
  }

  void barrier(const Stream& stream) override {
    stream.enqueue_host([this] { s_->arrive(rank_, "barrier", timeout_seconds()); });
  }

 private:
  // Phase 1: post `mine`, wait for all, then `read` the posted buffers (rank order).
  template <typename Read>
  void meet(const void* mine, const char* op, Read&& read) {
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->posted[static_cast<size_t>(rank_)] = mine;
    }
    s_->arrive(rank_, op, timeout_seconds());
    std::vector<const void*> in;
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      in = s_->posted;
    }
    read(in);
  }
  // Phase 2: every rank has read what it needs.
  void done_phase(const char* op) { s_->arrive(rank_, op, timeout_seconds()); }

  std::shared_ptr<LocalGroup::State> s_;
  int rank_;
};

}  // namespace

LocalGroup::LocalGroup(int world_size, double timeout_seconds) : state_(std::make_shared<State>()) {
  TD_CHECK_ARG(world_size >= 1, kOp, "LocalGroup: expected world_size >= 1, got {}", world_size);
  state_->n = world_size;
  state_->present.assign(static_cast<size_t>(world_size), 0);
  state_->posted.assign(static_cast<size_t>(world_size), nullptr);
  for (int r = 0; r < world_size; ++r)
    comms_.push_back(std::make_shared<LocalCommunicator>(state_, r, timeout_seconds));
}

LocalGroup::~LocalGroup() = default;

int LocalGroup::world_size() const { return state_->n; }

CommunicatorPtr LocalGroup::communicator(int rank) const {
  TD_CHECK_ARG(rank >= 0 && rank < state_->n, kOp, "LocalGroup: rank {} outside [0, {})", rank, state_->n);
  return comms_[static_cast<size_t>(rank)];
}

}  // namespace tandem::comm
