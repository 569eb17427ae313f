// Internal: the fallback over cuDNN's convolution algorithms as a pure function, without
// cuDNN types, so that it is tested with stubbed statuses in every build
// (tests/cuda/conv_candidates_test.cpp). cuda_conv.cpp feeds it the heuristics' list
// (cudnnGet*Algorithm_v7) and a runner that calls cuDNN.
#pragma once

#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/library_status.h"
#include "tandem/error.h"

namespace tandem::cuda_detail {

/// One algorithm as the heuristics describe it: its id, the heuristics' status for it (only
/// success is tried) and the workspace it asks for, bytes.
struct ConvCandidate {
  int algo = 0;
  int status = cudnn_status::success;
  size_t workspace_bytes = 0;
};

/// How the loop ended.
struct CandidateOutcome {
  int accepted = -1;                         // index of the candidate that ran; -1: none
  int status = cudnn_status::not_supported;  // the last status a run returned
  bool fatal = false;                        // ended on a status that is not a rejection
  int rejected = 0;                          // runs cuDNN rejected (cudnn_rejects_algorithm)
  int unallocatable = 0;                     // candidates skipped: workspace not allocatable
  size_t unallocatable_bytes = 0;            // the smallest such workspace, bytes
  std::string tried;                         // "algo 1: status 3002; algo 6: no workspace ..."
};

/// Tries `candidates[0..count)` in order until one runs:
///  - a candidate the heuristics did not report as success is skipped;
///  - `allocate(bytes)` returns an object with get() (the workspace, released when it goes
///    out of scope, before the next candidate's is taken); an Error(out_of_memory) from it
///    skips the candidate, any other error propagates;
///  - `run(algo, workspace, bytes)` returns cuDNN's status: success ends the loop, a rejection
///    (cudnn_rejects_algorithm: every NOT_SUPPORTED sub-code, BAD_PARAM_SIZE_INSUFFICIENT)
///    moves on, any other status ends it as fatal.
/// Never throws itself; the caller turns a failed outcome into an Error (throw_no_candidate).
template <typename Allocate, typename Run>
CandidateOutcome run_candidates(const ConvCandidate* candidates, int count, Allocate&& allocate, Run&& run) {
  CandidateOutcome out;
  auto note = [&out](const std::string& s) { out.tried += (out.tried.empty() ? "" : "; ") + s; };
  for (int i = 0; i < count; ++i) {
    const ConvCandidate& c = candidates[i];
    if (c.status != cudnn_status::success) continue;
    try {
      auto ws = allocate(c.workspace_bytes);
      out.status = run(c.algo, ws.get(), c.workspace_bytes);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::out_of_memory) throw;
      ++out.unallocatable;
      if (out.unallocatable == 1 || c.workspace_bytes < out.unallocatable_bytes)
        out.unallocatable_bytes = c.workspace_bytes;
      note(fmt::format("algo {}: workspace of {} bytes not allocatable", c.algo, c.workspace_bytes));
      continue;
    }
    if (out.status == cudnn_status::success) {
      out.accepted = i;
      return out;
    }
    note(fmt::format("algo {}: status {}", c.algo, out.status));
    if (!cudnn_rejects_algorithm(out.status)) {
      out.fatal = true;
      return out;
    }
    ++out.rejected;
  }
  return out;
}

/// The Error for an outcome without an accepted candidate, for the cuDNN call `call`:
/// a fatal status keeps its class (cudnn_error_code); when every candidate that cuDNN did not
/// reject lacked workspace, out_of_memory; otherwise not_available (no algorithm applies).
/// `status_text` is cuDNN's name for the last status (cudnnGetErrorString).
[[noreturn]] inline void throw_no_candidate(const char* call, const CandidateOutcome& o, const char* status_text) {
  ErrorCode code = ErrorCode::not_available;
  if (o.fatal)
    code = cudnn_error_code(o.status);
  else if (o.unallocatable > 0)
    code = ErrorCode::out_of_memory;
  const std::string tried = o.tried.empty() ? "the heuristics offered no algorithm" : "tried " + o.tried;
  if (o.fatal)
    throw_error(code, "cudnn", fmt::format("{} failed: {} (status {}); {}", call, status_text, o.status, tried));
  throw_error(code, "cudnn",
              o.rejected > 0
                  ? fmt::format("{} failed: no algorithm ran (last rejection: {}, status {}); {}", call, status_text,
                                o.status, tried)
                  : fmt::format("{} failed: no algorithm ran; {}", call, tried));
}

}  // namespace tandem::cuda_detail
