#include "tandem/error.h"

namespace tandem {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::io: return "io";
    case ErrorCode::format: return "format";
    case ErrorCode::not_available: return "not_available";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::numerical: return "numerical";
    case ErrorCode::internal: return "internal";
    case ErrorCode::distributed: return "distributed";
  }
  return "unknown";
}

void throw_error(ErrorCode code, const std::string& op, const std::string& message) {
  throw Error(code, "[" + op + "] " + message);
}

}  // namespace tandem
