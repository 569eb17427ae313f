// Module::blocks: a GPT and a ResNet declare their blocks in forward order with their
// state-dict prefixes and the layers outside them; a model without blocks declares none and
// refuses what needs them (a stream, kept inputs away from the device, block devices).
#include <gtest/gtest.h>

#include "tandem/error.h"
#include "tandem/nn/gpt.h"
#include "tandem/nn/models.h"

namespace tandem::nn {
namespace {

TEST(ModelBlocks, GptDeclaresItsTransformerBlocks) {
  Gpt m(GptConfig{61, 32, 3, 2, 64, 1e-5f});
  const ModelBlocks d = m.blocks();
  ASSERT_EQ(d.blocks.size(), 3u);
  EXPECT_EQ(d.blocks[0].name, "transformer.h.0");
  EXPECT_EQ(d.blocks[2].name, "transformer.h.2");
  EXPECT_EQ(d.blocks[1].module, m.h[1].get());
  ASSERT_EQ(d.outer.size(), 2u);
  EXPECT_EQ(d.outer[0].module, &m.embed);
  EXPECT_EQ(d.outer[1].name, "transformer.ln_f");
  EXPECT_EQ(d.kind, "GPT");
  EXPECT_EQ(d.outer_label, "embedding, ln_f and lm_head");
  EXPECT_TRUE(d.places_blocks);
  EXPECT_TRUE(d.block_devices.empty());
}

TEST(ModelBlocks, ResNetDeclaresItsResidualBlocks) {
  ModulePtr m = make_model("resnet18-cifar", ModelSpec{3, 32, 32, 10}, 0);
  const ModelBlocks d = m->blocks();
  ASSERT_EQ(d.blocks.size(), 8u);  // layer1.0 .. layer4.1
  EXPECT_EQ(d.blocks[0].name, "layer1.0");
  EXPECT_EQ(d.blocks[3].name, "layer2.1");
  EXPECT_EQ(d.blocks[7].name, "layer4.1");
  ASSERT_EQ(d.outer.size(), 6u);  // conv1, bn1, relu; avgpool, flatten, fc
  EXPECT_EQ(d.outer[0].name, "conv1");
  EXPECT_EQ(d.outer[5].name, "fc");
  EXPECT_EQ(d.kind, "ResNet");
  EXPECT_EQ(d.outer_label, "stem, classifier");
  EXPECT_FALSE(d.places_blocks);
  EXPECT_THROW(m->set_block_devices({Device{}}, [](const Tensor& t, Device) { return t; }), Error);
}

TEST(ModelBlocks, AModelWithoutBlocksDeclaresNoneAndRefusesWhatNeedsThem) {
  ModulePtr m = make_model("fmnist-cnn", 0);
  EXPECT_TRUE(m->blocks().blocks.empty());
  m->set_recompute(true);
  const auto same = [](const Tensor& x) { return x; };
  EXPECT_THROW(m->set_activation_offload(same, same), Error);
  m->set_activation_offload(nullptr, nullptr);  // nothing to undo
  m->set_param_stream(nullptr);
  struct NoStream final : ParamStream {
    void use(int, StreamPass) override {}
    void done(int, StreamPass) override {}
  } stream;
  EXPECT_THROW(m->set_param_stream(&stream), Error);
}

}  // namespace
}  // namespace tandem::nn
