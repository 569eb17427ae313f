#include "tandem/nn/fusion.h"

#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/sequential.h"

namespace tandem::nn {

int fuse_batch_norm_relu(Module& root, bool on) {
  int pairs = 0;
  if (auto* seq = dynamic_cast<Sequential*>(&root)) {
    for (size_t i = 0; i + 1 < seq->size(); ++i) {
      auto* bn = dynamic_cast<BatchNorm2d*>((*seq)[i].get());
      if (!bn || !dynamic_cast<ReLU*>((*seq)[i + 1].get())) continue;
      if (on && seq->fused_away(i)) continue;  // the BatchNorm2d itself is absorbed: leave the pair
      bn->set_fuse_relu(on);
      seq->set_fused_away(i + 1, on);
      ++pairs;
    }
  }
  for (Module* child : root.children()) pairs += fuse_batch_norm_relu(*child, on);
  return pairs;
}

}  // namespace tandem::nn
