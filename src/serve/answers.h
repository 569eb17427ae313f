// The JSON bodies of the successful answers (tandem/serve/server.h documents the fields).
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/serve/batcher.h"
#include "tandem/serve/server.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

/// POST /v1/predict: the top `top_k` classes of each row of p.probabilities, highest first
/// (ties: the lower class first, as torch.topk on CPU gives them), and the version.
std::string prediction_json(const train::ModelCard& card, const Prediction& p, int64_t top_k);
/// GET /v1/model.
std::string model_json(InferenceServer& server);
/// POST /v1/samples: samples accepted and the buffer's state.
std::string samples_json(InferenceServer& server, int64_t accepted);

}  // namespace tandem::serve
