#include "tandem/serve/inference_replica.h"

#include <cmath>
#include <vector>

#include "tandem/error.h"
#include "tandem/ops.h"

namespace tandem::serve {

InferenceReplica::InferenceReplica(const train::ModelCard& card, Device device, int threads)
    : device_(device), stream_(device) {
  ops::set_num_threads(threads);
  model_ = nn::make_model(card.model, card.spec, 0);
  if (!device_.is_host()) model_->to(device_);
  model_->eval();
}

InferenceReplica::~InferenceReplica() {
  try {
    stream_.stream().synchronize();
  } catch (...) {
    // A device error of the last batch was reported with it.
  }
}

void InferenceReplica::load(const ServedWeights& w) {
  w.weights->wait();
  const NamedTensors& src = w.weights->tensors();
  const std::vector<nn::NamedTensor> dst = model_->state_dict();
  TD_CHECK(src.size() == dst.size(), ErrorCode::format, "serve", "version {} holds {} tensors, the model has {}",
           w.version, src.size(), dst.size());
  for (size_t i = 0; i < dst.size(); ++i) {
    const Tensor& s = src[i].second;
    Tensor d = dst[i].tensor;
    TD_CHECK(src[i].first == dst[i].name && s.shape() == d.shape() && s.dtype() == d.dtype(), ErrorCode::format,
             "serve", "version {}: tensor {} '{}' {} does not match the model's '{}' {}", w.version, i, src[i].first,
             shape_str(s.shape()), dst[i].name, shape_str(d.shape()));
    if (d.device().is_host()) {
      d.copy_from(s);
    } else {
      runtime_for(d.device()).copy_async(d.raw_data(), d.device(), s.raw_data(), Device{}, s.nbytes(), stream_.stream());
    }
  }
  stream_.stream().synchronize();  // the snapshot may be freed once no request holds it
  loaded_ = w.version;
  loaded_ptr_ = &w;
}

Tensor InferenceReplica::run(const Tensor& inputs, const ServedWeights& w) {
  loaded_last_ = loaded_ptr_ != &w || loaded_ != w.version;
  if (loaded_last_) load(w);
  Tensor logits;
  if (device_.is_host()) {
    logits = model_->forward(inputs);
  } else {
    const Tensor x = inputs.to(device_, stream_.stream());
    logits = model_->forward(x).to(Device{}, stream_.stream());
    stream_.stream().synchronize();
  }
  const int64_t n = logits.shape()[0], k = logits.shape()[1];
  Tensor probs = Tensor::empty({n, k});
  const float* l = logits.data<float>();
  float* p = probs.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < k; ++j) mx = std::max(mx, static_cast<double>(l[i * k + j]));
    std::vector<double> e(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) sum += (e[static_cast<size_t>(j)] = std::exp(static_cast<double>(l[i * k + j]) - mx));
    for (int64_t j = 0; j < k; ++j) p[i * k + j] = static_cast<float>(e[static_cast<size_t>(j)] / sum);
  }
  return probs;
}

}  // namespace tandem::serve
