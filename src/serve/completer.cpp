#include "tandem/serve/completer.h"

#include <chrono>

#include <fmt/format.h>

#include "serve/choice_text.h"
#include "tandem/nn/generate/gpt_weights.h"
#include "tandem/ops.h"
#include "tandem/profile/profiler.h"
#include "tandem/serve/http_error.h"

namespace tandem::serve {

int64_t Completion::completion_tokens() const {
  int64_t n = 0;
  for (const CompletionChoice& c : choices) n += static_cast<int64_t>(c.tokens.size());
  return n;
}

Completer::Completer(const train::ModelCard& card, BatcherOptions options, ServeMetrics* metrics)
    : card_(card), opt_(std::move(options)), metrics_(metrics) {
  TD_CHECK_ARG(opt_.threads >= 1 && opt_.threads <= 1024, "serve",
               "--serve-threads: expected 1..1024, got {}", opt_.threads);
  TD_CHECK(opt_.device == "cpu" || opt_.device == "cpu:0", ErrorCode::not_available, "serve",
           "--serve-device {}: a language model generates on the cpu (expected --serve-device cpu)",
           opt_.device);
  describe_ = fmt::format("cpu (generation thread, {} thread{})", opt_.threads,
                          opt_.threads == 1 ? "" : "s");
  std::promise<void> ready;
  std::future<void> started = ready.get_future();
  thread_ = std::thread([this, &ready] { loop(ready); });
  try {
    started.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::future<Completion> Completer::submit(CompletionSpec spec,
                                          std::shared_ptr<const ServedWeights> w,
                                          DeltaCallback on_delta) {
  TD_CHECK_ARG(spec.n >= 1, "serve", "a completion of {} choices: expected at least 1", spec.n);
  Job job;
  job.spec = std::move(spec);
  job.weights = std::move(w);
  job.on_delta = std::move(on_delta);
  std::future<Completion> f = job.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) throw HttpError(503, "the server is stopping");
    if (static_cast<int64_t>(queue_.size()) >= opt_.max_queue)
      throw HttpError(503, fmt::format("{} requests wait already: try again later", queue_.size()));
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return f;
}

Completion Completer::run(Job& job, nn::GptDecoder& decoder) const {
  const auto t0 = std::chrono::steady_clock::now();
  Completion c;
  c.prompt_tokens = static_cast<int64_t>(job.spec.prompt.size());
  bool cancelled = false;
  for (int64_t i = 0; i < job.spec.n && !cancelled; ++i) {
    nn::GenerateOptions o = job.spec.options;
    o.sampling.seed += static_cast<uint64_t>(i);
    ChoiceText text(card_.tokenizer.get(), job.spec.stop);
    int64_t made = 0;
    bool finished = false;  // the choice's last step was handed over
    const auto step = [&](int64_t id, std::string part, const std::string& finish_reason) {
      finished = !finish_reason.empty();
      if (job.on_delta && !job.on_delta({i, id, std::move(part), finish_reason})) cancelled = true;
    };
    const nn::GenerateResult r = nn::generate(decoder, job.spec.prompt, o, [&](int64_t id) {
      ++made;
      std::string part = text.add(id);
      // The reasons generate() would give: the end-of-text id first, then the length.
      const bool stop = text.stopped() || id == o.eos_id;
      const bool last = stop || made == o.max_new_tokens;
      if (last) part += text.finish();
      step(id, std::move(part), last ? (stop ? "stop" : "length") : "");
      return !cancelled && !text.stopped();
    });
    CompletionChoice choice;
    choice.tokens = r.tokens;
    choice.finish_reason = text.stopped() ? "stop" : r.finish_reason;
    if (!finished && !cancelled) step(-1, text.finish(), choice.finish_reason);  // no tokens
    choice.text = text.text();
    c.choices.push_back(std::move(choice));
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (metrics_) metrics_->count_completion(c.completion_tokens(), cancelled);
  return c;
}

void Completer::loop(std::promise<void>& ready) {
  profile::Profiler::global().name_this_thread("serve generation");
  std::unique_ptr<nn::Gpt> model;
  std::unique_ptr<nn::GptDecoder> decoder;
  try {
    ops::set_num_threads(opt_.threads);
    model = std::make_unique<nn::Gpt>(card_.gpt);
    model->eval();
    decoder = std::make_unique<nn::GptDecoder>(*model);
    ready.set_value();
  } catch (...) {
    ready.set_exception(std::current_exception());
    return;
  }
  // Held, so that a new snapshot can never reuse the loaded one's address.
  std::shared_ptr<const ServedWeights> loaded;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      const ServedWeights& w = *job.weights;
      if (job.weights != loaded) {
        loaded = nullptr;
        w.weights->wait();
        nn::load_gpt_weights(*model, w.weights->tensors(), fmt::format("version {}", w.version));
        loaded = job.weights;
        if (metrics_)
          metrics_->version_loaded(w.version,
                                   static_cast<double>(profile::now_ns() - w.published_ns) * 1e-9);
      }
      Completion c = run(job, *decoder);
      c.version = w.version;
      job.done.set_value(std::move(c));
    } catch (...) {
      job.done.set_exception(std::current_exception());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (Job& j : queue_)
    j.done.set_exception(std::make_exception_ptr(HttpError(503, "the server is stopping")));
  queue_.clear();
}

}  // namespace tandem::serve
