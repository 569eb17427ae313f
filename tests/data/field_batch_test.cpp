// FieldBatch: a batch's tensors picked by the role of their field (the first field of that
// role), the sample count, and the errors for a missing role or a tensor count that does not
// match the fields.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/dataset_test_util.h"
#include "tandem/data/field_batch.h"
#include "tandem/error.h"

namespace tandem::data {
namespace {

std::vector<Field> token_fields() {
  return {{"tokens", DType::i32, {4}, FieldRole::input, 50}, {"targets", DType::i64, {4}, FieldRole::target, 50}};
}

TEST(FieldBatch, PicksTheFirstFieldOfEachRole) {
  const std::vector<Field> fields = {{"images", DType::f32, {1, 2, 2}, FieldRole::input},
                                     {"masks", DType::f32, {1, 2, 2}, FieldRole::input},
                                     {"labels", DType::i64, {}, FieldRole::target, 10}};
  const Tensor images = Tensor::empty({3, 1, 2, 2}), masks = Tensor::empty({3, 1, 2, 2});
  const Tensor labels = Tensor::empty({3}, DType::i64);
  const FieldBatch b(fields, {images, masks, labels});
  EXPECT_EQ(b.get(FieldRole::input).storage(), images.storage());
  EXPECT_EQ(b.get(FieldRole::target).storage(), labels.storage());
  EXPECT_EQ(b.samples(), 3);
  EXPECT_EQ(&b.fields(), &fields);
  EXPECT_EQ(b.tensors().size(), 3u);
}

TEST(FieldBatch, MissingRoleNamesTheRoleAndTheFields) {
  const std::vector<Field> fields = {token_fields()[0]};
  const FieldBatch b(fields, {Tensor::empty({2, 4}, DType::i32)});
  const std::string what = testing::error_of([&] { b.get(FieldRole::target); }, ErrorCode::invalid_argument);
  EXPECT_NE(what.find("no target field"), std::string::npos) << what;
  EXPECT_NE(what.find("tokens i32 [4] input"), std::string::npos) << what;
}

TEST(FieldBatch, EmptyAndCleared) {
  FieldBatch none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.samples(), 0);
  EXPECT_TRUE(none.fields().empty());
  EXPECT_THROW(none.get(FieldRole::input), Error);
  const std::vector<Field> fields = token_fields();
  FieldBatch b(fields, {Tensor::empty({2, 4}, DType::i32), Tensor::empty({2, 4}, DType::i64)});
  EXPECT_EQ(b.samples(), 2);
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_THROW(b.get(FieldRole::input), Error);
}

TEST(FieldBatch, OneTensorPerField) {
  const std::vector<Field> fields = token_fields();
  const auto one_tensor = [&] { (void)FieldBatch(fields, {Tensor::empty({2, 4}, DType::i32)}); };
  const std::string what = testing::error_of(one_tensor, ErrorCode::invalid_argument);
  EXPECT_NE(what.find("1 tensors for 2 fields"), std::string::npos) << what;
}

}  // namespace
}  // namespace tandem::data
