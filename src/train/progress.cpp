#include "tandem/train/progress.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <fmt/format.h>

namespace tandem::train {

namespace {
std::atomic<FILE*> g_open_line{nullptr};  // the stream a drawn bar left mid-line, if any
}  // namespace

void end_progress_line() {
  if (FILE* f = g_open_line.exchange(nullptr)) {
    std::fputc('\n', f);
    std::fflush(f);
  }
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

ProgressBar::ProgressBar(FILE* out, bool live) : out_(out), live_(live) {}

void ProgressBar::begin_epoch(int epoch, int epochs, int64_t total_steps) {
  epoch_ = epoch;
  epochs_ = epochs;
  total_ = total_steps;
  start_ = std::chrono::steady_clock::now();
  last_draw_ = {};
}

void ProgressBar::update(int64_t step, double loss, int64_t samples) {
  if (!live_) return;
  const auto now = std::chrono::steady_clock::now();
  // Counted in steps: the run's step of --max-steps; else the epoch's of its steps.
  const int64_t at = max_steps_ > 0 ? std::min(max_steps_, static_cast<int64_t>(epoch_ - 1) * total_ + step) : step;
  const int64_t end = max_steps_ > 0 ? max_steps_ : total_;
  if (at < end && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(samples) / elapsed : 0.0;
  const double eta = step > 0 ? elapsed * static_cast<double>(end - at) / static_cast<double>(step) : NAN;
  constexpr int kWidth = 24;
  const int filled = end > 0 ? static_cast<int>(kWidth * at / end) : 0;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  const std::string where = max_steps_ > 0 ? fmt::format("step {}/{} [{}]", at, end, bar)
                                           : fmt::format("epoch {}/{} [{}] {}/{}", epoch_, epochs_, bar, at, end);
  fmt::print(out_, "\r\033[2K{} loss {} {:.0f} {} ETA {}", where,
             std::isnan(loss) ? std::string("n/a") : fmt::format("{:.4f}", loss), rate, unit_, format_duration(eta));
  std::fflush(out_);
  drawn_ = true;
  g_open_line = out_;
}

void ProgressBar::clear() {
  if (live_ && drawn_) {
    fmt::print(out_, "\r\033[2K");
    std::fflush(out_);
  }
  drawn_ = false;
  g_open_line = nullptr;
}

}  // namespace tandem::train
