// Runs a function once per rank, each on its own thread (ranks of a comm::LocalGroup), and
// joins them all before rethrowing the first exception a rank raised.
#pragma once

#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace tandem::testing {

inline void on_ranks(int world_size, const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tandem::testing
