// A checkpoint's state counters (epoch, steps, samples, the optimizer's step count) are JSON
// integers within their type, or the state is refused by name: 2.9 is not truncated to 2,
// 4294967298 does not wrap to 2 in an int, -5 is not a count.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tandem/error.h"
#include "train/checkpoint/run_state.h"

namespace tandem::train::checkpoint {
namespace {

std::string refusal(const nlohmann::json& state) {
  try {
    state_value<int>(state, "epoch", "ck/state.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    return e.what();
  }
  ADD_FAILURE() << state.dump() << " accepted";
  return "";
}

TEST(StateValues, CountersAreIntegersInTheirRange) {
  EXPECT_EQ(state_value<int>(nlohmann::json{{"epoch", 3}}, "epoch", "p"), 3);
  EXPECT_EQ(state_value<int>(nlohmann::json{{"epoch", -1}}, "epoch", "p"), -1);
  EXPECT_EQ(state_value<int64_t>(nlohmann::json{{"step", int64_t{1} << 40}}, "step", "p"), int64_t{1} << 40);
  EXPECT_EQ(state_value<double>(nlohmann::json{{"lr", 0.5}}, "lr", "p"), 0.5);
  for (const nlohmann::json& bad : {nlohmann::json{{"epoch", 2.9}}, nlohmann::json{{"epoch", 4294967298ull}},
                                    nlohmann::json{{"epoch", -5}}, nlohmann::json{{"epoch", "2"}}}) {
    const std::string msg = refusal(bad);
    EXPECT_NE(msg.find("ck/state.json: state entry 'epoch' is "), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected an integer in [-1, 2147483647]"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tandem::train::checkpoint
