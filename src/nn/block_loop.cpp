#include "tandem/nn/block_loop.h"

#include <utility>

#include "tandem/error.h"

namespace tandem::nn {

void BlockLoop::set_stream(ParamStream* stream) {
  TD_CHECK_ARG(stream == nullptr || devices_.empty(), "BlockLoop",
               "parameters stream to one device only (no block devices)");
  stream_ = stream;
}

void BlockLoop::set_devices(std::vector<Device> devices, Module::CrossFn cross, size_t blocks) {
  TD_CHECK_ARG(devices.empty() || (devices.size() == blocks && cross), "BlockLoop",
               "expected a device per block ({}) and a copy function, got {} devices", blocks,
               devices.size());
  TD_CHECK_ARG(devices.empty() || stream_ == nullptr, "BlockLoop",
               "blocks on devices of their own do not stream their parameters");
  devices_ = std::move(devices);
  cross_ = devices_.empty() ? Module::CrossFn() : std::move(cross);
}

void BlockLoop::begin(StreamPass pass) {
  if (stream_) stream_->use(kOuterPart, pass);
}

void BlockLoop::end(StreamPass pass) {
  if (stream_) stream_->done(kOuterPart, pass);
}

Tensor BlockLoop::forward(const std::vector<Module*>& blocks, Tensor x, StreamPass pass) {
  const Device home = x.device();
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!devices_.empty()) x = cross_(x, devices_[i]);
    if (stream_) stream_->use(static_cast<int>(i), pass);
    x = blocks[i]->forward(x);
    if (stream_) stream_->done(static_cast<int>(i), pass);
  }
  if (!devices_.empty()) x = cross_(x, home);
  return x;
}

Tensor BlockLoop::backward(const std::vector<Module*>& blocks, Tensor g,
                           const std::function<void(size_t)>& after) {
  const Device home = g.device();
  for (size_t i = blocks.size(); i-- > 0;) {
    if (!devices_.empty()) g = cross_(g, devices_[i]);
    if (stream_) stream_->use(static_cast<int>(i), StreamPass::backward);
    g = blocks[i]->backward(g);
    if (stream_) stream_->done(static_cast<int>(i), StreamPass::backward);
    if (after) after(i);
    if (!g.defined()) return g;
  }
  if (!devices_.empty()) g = cross_(g, home);
  return g;
}

}  // namespace tandem::nn
