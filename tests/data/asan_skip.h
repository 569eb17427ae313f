// SKIP_UNDER_ASAN(): skips a test that loads the SentencePiece module, which needs
// dlopen(RTLD_DEEPBIND) (src/data/tokens/sentencepiece_module.h), refused by AddressSanitizer.
#pragma once

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN() \
  GTEST_SKIP() << "the SentencePiece module cannot be loaded under AddressSanitizer"
#else
#define SKIP_UNDER_ASAN() (void)0
#endif
