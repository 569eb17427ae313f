// SKIP_UNDER_SANITIZER(): skips a test that loads the SentencePiece module, which needs
// dlopen(RTLD_DEEPBIND) (src/data/tokens/sentencepiece_module.h), refused by AddressSanitizer
// and ThreadSanitizer.
#pragma once

#include <gtest/gtest.h>

#include "data/sanitizer_build.h"

#define SKIP_UNDER_SANITIZER()                                                                        \
  do {                                                                                           \
    if (::tandem::testing::kDeepBindRefused)                                                     \
      GTEST_SKIP() << "the SentencePiece module cannot be loaded under "                         \
                   << (::tandem::testing::kAddressSanitizer ? "AddressSanitizer" : "ThreadSanitizer"); \
  } while (0)
