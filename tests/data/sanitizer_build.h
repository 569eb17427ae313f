// Whether the test binary is built with a sanitizer (the sanitizer builds of docs/sanitizers.md):
// tests whose checks cannot hold under one skip them and say so.
//  - kAddressSanitizer: its quarantine holds freed memory, so resident memory grows.
//  - kThreadSanitizer: its allocator and shadow memory grow resident memory too.
//  - kDeepBindRefused: both refuse dlopen(RTLD_DEEPBIND), which the SentencePiece module needs
//    (src/data/tokens/sentencepiece_module.h).
// gcc defines __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang 14 only __has_feature.
#pragma once

namespace tandem::testing {

#if defined(__has_feature)
#define TD_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define TD_TEST_HAS_FEATURE(x) 0
#endif

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = TD_TEST_HAS_FEATURE(address_sanitizer);
#endif
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = TD_TEST_HAS_FEATURE(thread_sanitizer);
#endif

inline constexpr bool kDeepBindRefused = kAddressSanitizer || kThreadSanitizer;

}  // namespace tandem::testing
