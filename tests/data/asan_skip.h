// SKIP_UNDER_ASAN(): skips a test that loads the SentencePiece module, which needs
// dlopen(RTLD_DEEPBIND) (src/data/tokens/sentencepiece_module.h), refused by AddressSanitizer.
#pragma once

#include <gtest/gtest.h>

// gcc defines __SANITIZE_ADDRESS__, clang 14 only __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
#define TD_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TD_TEST_UNDER_ASAN 1
#endif
#endif

#if defined(TD_TEST_UNDER_ASAN)
#define SKIP_UNDER_ASAN() \
  GTEST_SKIP() << "the SentencePiece module cannot be loaded under AddressSanitizer"
#else
#define SKIP_UNDER_ASAN() (void)0
#endif
