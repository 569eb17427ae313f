// modules_of<T>(root): every module of type T in the graph below `root` (root included), in
// pre-order, which is forward order for the built-in containers (a ResNet's residual blocks
// layer1.0 .. layer4.1, a block's BatchNorm2d layers). Pointers into the graph; it stays the
// owner. Thread-safety: as Module (one thread at a time).
#pragma once

#include <vector>

#include "tandem/nn/module.h"

namespace tandem::nn {

template <typename T>
void collect_modules_of(Module& root, std::vector<T*>& out) {
  if (auto* m = dynamic_cast<T*>(&root)) out.push_back(m);
  for (Module* c : root.children()) collect_modules_of<T>(*c, out);
}

template <typename T>
std::vector<T*> modules_of(Module& root) {
  std::vector<T*> out;
  collect_modules_of<T>(root, out);
  return out;
}

}  // namespace tandem::nn
