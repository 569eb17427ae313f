#include "serve/completion_stream.h"

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>

#include "tandem/serve/http_error.h"

namespace tandem::serve {
namespace {

// The events between the generation thread and the connection's thread.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::string pending;     // events made and not yet written
  bool cancelled = false;  // the client went away: make no more tokens
  std::future<Completion> done;

  void cancel() {
    std::lock_guard<std::mutex> lock(mu);
    cancelled = true;
  }
};

// How long the connection's thread waits for an event before httplib checks whether the
// server is stopping and calls again.
constexpr auto kPoll = std::chrono::milliseconds(50);

}  // namespace

void stream_completion(Completer& completer, const train::ModelCard& card,
                       const CompletionRequest& r, std::shared_ptr<const ServedWeights> w,
                       httplib::Response& res) {
  auto st = std::make_shared<Stream>();
  const auto head = std::make_shared<const CompletionHeader>(completion_header(card, w->version));
  const train::ModelCard* c = &card;  // the server's, which outlives its connections
  DeltaCallback on_delta = [st, head, c](const CompletionDelta& d) {
    std::string event = completion_chunk(*c, *head, d);
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->cancelled) return false;
      st->pending += event;
    }
    st->cv.notify_one();
    return true;
  };
  st->done = completer.submit(r.spec, std::move(w), std::move(on_delta));
  res.set_header("Cache-Control", "no-cache");
  const bool include_usage = r.include_usage;
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, head, include_usage](size_t, httplib::DataSink& sink) {
        std::string out;
        bool finished = false;
        {
          std::unique_lock<std::mutex> lock(st->mu);
          st->cv.wait_for(lock, kPoll, [&] { return !st->pending.empty(); });
          // Every event is queued before the future is ready: seen ready, none can follow.
          finished = st->done.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
          out.swap(st->pending);
        }
        if (finished) {
          try {
            const Completion done = st->done.get();
            if (include_usage) out += usage_chunk(*head, done);
          } catch (const std::exception& e) {
            out += "data: " + error_json(http_status_of(e), e.what()) + "\n\n";
          }
          out += "data: [DONE]\n\n";
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          st->cancel();
          return false;  // httplib closes the connection
        }
        if (finished) sink.done();
        return true;
      },
      [st](bool) { st->cancel(); });
}

}  // namespace tandem::serve
