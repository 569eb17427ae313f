// A model of one's own made of tandem's nn modules, registered under a name so that the
// Trainer builds it (nn::register_model):
//   Conv2d(C, 8, 3, padding 1), BatchNorm2d(8), ReLU, MaxPool2d(2),
//   Conv2d(8, 16, 3, padding 1), BatchNorm2d(16), ReLU, AdaptiveAvgPool2d(1), Flatten,
//   Linear(16, classes)
// input [N, C, H, W] f32 -> logits [N, classes]; any H, W >= 2.
#pragma once

inline constexpr const char* kSmallConvnet = "small-convnet";

/// Registers kSmallConvnet with tandem (call once, before the Trainer is built).
void register_small_convnet();
