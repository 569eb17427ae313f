// Three parameters of 1025, 63 and 300 elements ("p0", "p1", "p2") on a device, with random
// values and gradients, and the names of a state list: for the tests of what an optimizer and
// its home say about themselves (tests/optim/offload_layout_test.cpp,
// tests/train/param_home_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "core/virt_test_util.h"
#include "tandem/nn/module.h"

namespace tandem::testing {

struct ThreeParams {
  explicit ThreeParams(Device d) {
    const std::vector<Shape> shapes{{1025}, {7, 9}, {300}};
    const char* const names[] = {"p0", "p1", "p2"};
    for (size_t i = 0; i < 3; ++i) {
      all[i].name = names[i];
      all[i].value = on(d, random_host(shapes[i], 20 + i));
      all[i].grad = on(d, random_host(shapes[i], 40 + i));
    }
  }
  std::vector<nn::Parameter*> pointers() { return {&all[0], &all[1], &all[2]}; }
  nn::Parameter all[3];
};

inline std::vector<std::string> state_names(const std::vector<nn::NamedTensor>& state) {
  std::vector<std::string> out;
  for (const nn::NamedTensor& t : state) out.push_back(t.name);
  return out;
}

}  // namespace tandem::testing
