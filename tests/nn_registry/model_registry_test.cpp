// register_model: a model of one's own, built from tandem's modules, is made by make_model like
// a built-in one (sized from the spec, initialised from the seed, named), and bad registrations
// are refused naming the model. A test program of its own: registrations are process-wide and
// would show in the model lists that the nn tests compare.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "tandem/error.h"
#include "tandem/nn/flatten.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/models.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/sequential.h"

namespace tandem::nn {
namespace {

ModulePtr two_layer(const ModelSpec& s) {
  return std::make_shared<Sequential>(std::vector<ModulePtr>{
      std::make_shared<Flatten>(), std::make_shared<Linear>(s.channels * s.height * s.width, 8),
      std::make_shared<ReLU>(), std::make_shared<Linear>(8, s.num_classes)});
}

std::string registration_error(const std::string& name, ModelFactory f) {
  try {
    register_model(name, std::move(f));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(ModelRegistry, RegisteredModelIsBuiltLikeABuiltInOne) {
  register_model("test-two-layer", two_layer);
  const std::vector<std::string> names = model_names();
  EXPECT_EQ(names.front(), "fmnist-cnn");
  EXPECT_NE(std::find(names.begin(), names.end(), "test-two-layer"), names.end());
  EXPECT_NO_THROW(check_model_name("test-two-layer"));

  const ModelSpec spec{2, 3, 5, 4};
  ModulePtr m = make_model("test-two-layer", spec, 11);
  ModulePtr by_hand = two_layer(spec);
  by_hand->init_parameters(11);
  const auto a = m->state_dict(), b = by_hand->state_dict();
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].name, "1.weight");
  EXPECT_EQ(shape_str(a[0].tensor.shape()), "[8, 30]");
  EXPECT_EQ(shape_str(a[3].tensor.shape()), "[4]");
  for (size_t i = 0; i < a.size(); ++i)
    for (int64_t k = 0; k < a[i].tensor.numel(); ++k)
      ASSERT_EQ(a[i].tensor.item(k), b[i].tensor.item(k)) << a[i].name << "[" << k << "]";
  // PyTorch's Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), not all zero.
  double mx = 0;
  for (int64_t k = 0; k < a[0].tensor.numel(); ++k)
    mx = std::max(mx, std::abs(a[0].tensor.item(k)));
  EXPECT_GT(mx, 0.05);
  EXPECT_LE(mx, 1 / std::sqrt(30.0));
  ModulePtr other_seed = make_model("test-two-layer", spec, 12);
  EXPECT_NE(other_seed->state_dict()[0].tensor.item(0), a[0].tensor.item(0));
}

TEST(ModelRegistry, BadRegistrationsAreRefusedNamingTheModel) {
  register_model("test-once", two_layer);
  EXPECT_NE(registration_error("test-once", two_layer)
                .find("[model] register_model test-once: a model of that name"),
            std::string::npos);
  EXPECT_NE(registration_error("mlp", two_layer).find("register_model mlp: a built-in model"),
            std::string::npos);
  EXPECT_NE(registration_error("", two_layer).find("expected a model name"), std::string::npos);
  EXPECT_NE(registration_error("test-empty", nullptr)
                .find("register_model test-empty: expected a factory"),
            std::string::npos);
  // A factory that gives no module for 7 classes.
  register_model("test-null", [](const ModelSpec& s) {
    return s.num_classes == 7 ? ModulePtr() : two_layer(s);
  });
  try {
    make_model("test-null", ModelSpec{1, 28, 28, 7}, 0);
    ADD_FAILURE() << "a null module was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "[model] test-null: its factory (register_model) returned no module"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace tandem::nn
