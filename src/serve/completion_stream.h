// A streamed POST /v1/completions answer ("stream": true), as OpenAI's server-sent events:
// one event "data: {chunk}\n\n" per token as it is made (completions.h: completion_chunk), the
// usage chunk when stream_options.include_usage asks for it, then "data: [DONE]\n\n"; an error
// after the events began is one event "data: {"error": ...}\n\n" before [DONE]. The
// generation thread queues the events (Completer's DeltaCallback) and the connection's thread
// writes them through httplib's chunked content provider as they come; a client that goes
// away (a write fails, or the response is dropped) stops the generation at its next token.
// Thread-safety: the answer's state is shared by the two threads under a mutex.
#pragma once

#include <memory>

#include <httplib.h>

#include "serve/completions.h"
#include "tandem/serve/completer.h"
#include "tandem/serve/weights_slot.h"

namespace tandem::serve {

/// Submits `r` with weights `w` to `completer` and sets `res` to stream its events
/// (Content-Type text/event-stream). Throws what Completer::submit throws (HttpError 503),
/// before anything is sent.
void stream_completion(Completer& completer, const train::ModelCard& card,
                       const CompletionRequest& r, std::shared_ptr<const ServedWeights> w,
                       httplib::Response& res);

}  // namespace tandem::serve
