// HttpError: a request that must be answered with an HTTP status other than 400 (401, 404,
// 405, 413, 503) or 400 with a message of its own. Everything else the service throws is a
// tandem::Error: invalid_argument and format answer 400 (a bad request), the rest 500.
// Every error answer is one line of JSON: {"error":{"status":400,"message":"..."}}.
// Thread-safety: values.
#pragma once

#include <string>

#include "tandem/error.h"

namespace tandem::serve {

class HttpError : public Error {
 public:
  HttpError(int status, const std::string& message) : Error(ErrorCode::invalid_argument, message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

/// The HTTP status for an exception thrown while answering: HttpError's own, 400 for
/// Error(invalid_argument / format), 500 otherwise.
int http_status_of(const std::exception& e);

/// {"error":{"status":S,"message":"..."}} on one line (no newline inside; the message's own
/// newlines become spaces).
std::string error_json(int status, const std::string& message);

}  // namespace tandem::serve
