#include "train/checkpoint/run_state.h"

#include <cstdint>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "tandem/error.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;


// Counters (epochs, steps, samples) are JSON integers within T's range and >= -1 (-1: none
// yet); nlohmann would otherwise truncate 2.9 to 2 and wrap 4294967298 to 2.
template <typename T>
void check_integer(const json& v, const char* key, const std::string& path) {
  const bool integer = v.is_number_integer();
  const bool fits = integer && (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                                       : v.get<int64_t>() >= -1 &&
                                                             v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max()));
  if (!fits)
    throw_error(ErrorCode::format, "checkpoint",
                fmt::format("{}: state entry '{}' is {}: expected an integer in [-1, {}]", path, key,
                            v.dump().substr(0, 32), std::numeric_limits<T>::max()));
}

template <typename T>
T state_value(const json& state, const char* key, const std::string& path) {
  const auto it = state.find(key);
  if constexpr (std::is_integral_v<T>)
    if (it != state.end()) check_integer<T>(*it, key, path);
  try {
    if (it != state.end()) return it->get<T>();
  } catch (const std::exception& e) {
    throw_error(ErrorCode::format, "checkpoint", fmt::format("{}: state entry '{}' is malformed: {}", path, key, e.what()));
  }
  throw_error(ErrorCode::format, "checkpoint", fmt::format("{}: the state lacks '{}'", path, key));
}

template int state_value<int>(const json&, const char*, const std::string&);
template int64_t state_value<int64_t>(const json&, const char*, const std::string&);
template double state_value<double>(const json&, const char*, const std::string&);
template std::string state_value<std::string>(const json&, const char*, const std::string&);
template json state_value<json>(const json&, const char*, const std::string&);

EpochStats stats_from_json(const json& j, const std::string& path) {
  EpochStats s;
  s.epoch = state_value<int>(j, "epoch", path);
  s.train_loss = state_value<double>(j, "train_loss", path);
  s.train_accuracy = state_value<double>(j, "train_accuracy", path);
  s.test_loss = state_value<double>(j, "test_loss", path);
  s.test_accuracy = state_value<double>(j, "test_accuracy", path);
  s.samples_per_s = state_value<double>(j, "images_per_s", path);
  s.tokens_per_s = j.value("tokens_per_s", 0.0);  // written for token data only
  s.seconds = state_value<double>(j, "seconds", path);
  s.lr = state_value<double>(j, "lr", path);
  s.pinned_peak_bytes = static_cast<size_t>(state_value<int64_t>(j, "pinned_peak_bytes", path));
  s.pinned_allocated_bytes = j.value("pinned_allocated_bytes", size_t{0});  // written where > 0
  s.pageable_allocated_bytes = j.value("pageable_allocated_bytes", size_t{0});
  return s;
}

}  // namespace tandem::train::checkpoint
