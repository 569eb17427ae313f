#include "tandem/serve/http_error.h"

#include <nlohmann/json.hpp>

namespace tandem::serve {

int http_status_of(const std::exception& e) {
  if (const auto* h = dynamic_cast<const HttpError*>(&e)) return h->status();
  if (const auto* t = dynamic_cast<const Error*>(&e))
    return t->code() == ErrorCode::invalid_argument || t->code() == ErrorCode::format ? 400 : 500;
  return 500;
}

std::string error_json(int status, const std::string& message) {
  std::string m = message;
  for (char& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  nlohmann::json j = {{"error", {{"status", status}, {"message", m}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::serve
