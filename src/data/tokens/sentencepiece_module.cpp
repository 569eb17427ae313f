// Loading libtandem_sentencepiece.so (sentencepiece_module.h).
#include "data/tokens/sentencepiece_module.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sentencepiece/tandem_sentencepiece.h"
#include "tandem/error.h"

#ifndef TANDEM_INSTALL_LIBDIR
#define TANDEM_INSTALL_LIBDIR "lib"
#endif
#ifndef TANDEM_INSTALL_FULL_LIBDIR
#define TANDEM_INSTALL_FULL_LIBDIR "/usr/local/lib"
#endif

namespace tandem::data::tokens {
namespace {

constexpr const char* kOp = "tokenize";
constexpr const char* kName = "libtandem_sentencepiece.so";

std::vector<std::string> candidates() {
  if (const char* env = std::getenv("TANDEM_SENTENCEPIECE_MODULE"); env && *env) return {env};
  std::vector<std::string> v;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path dir = exe.parent_path();
    v.push_back((dir / kName).string());
    v.push_back((dir.parent_path() / TANDEM_INSTALL_LIBDIR / kName).lexically_normal().string());
  }
  const std::string configured = std::string(TANDEM_INSTALL_FULL_LIBDIR) + "/" + kName;
  if (std::find(v.begin(), v.end(), configured) == v.end()) v.push_back(configured);
  return v;
}

template <class F>
void bind(void* lib, const char* name, F& fn, const std::string& path) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  TD_CHECK(fn != nullptr, ErrorCode::not_available, kOp, "{}: the SentencePiece module lacks {}",
           path, name);
}

// AddressSanitizer: gcc defines __SANITIZE_ADDRESS__, clang 14 only __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define TD_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TD_UNDER_ASAN 1
#endif
#endif

SentencePieceModule load_module() {
#if defined(TD_UNDER_ASAN)
  throw_error(
      ErrorCode::not_available, kOp,
      "the SentencePiece module needs dlopen(RTLD_DEEPBIND), which AddressSanitizer refuses: "
      "tokenize with a build without -fsanitize=address");
#endif
  std::vector<std::string> tried;
  for (const std::string& path : candidates()) {
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib) {
      std::error_code ec;
      tried.push_back(std::filesystem::exists(path, ec) ? fmt::format("{} ({})", path, ::dlerror())
                                                        : path);
      continue;
    }
    int (*version)() = nullptr;
    bind(lib, "tsp_abi_version", version, path);
    TD_CHECK(version() == TSP_ABI_VERSION, ErrorCode::not_available, kOp,
             "{}: the SentencePiece module has interface version {}, expected {}", path, version(),
             TSP_ABI_VERSION);
    SentencePieceModule m{};
    bind(lib, "tsp_train", m.train, path);
    bind(lib, "tsp_load", m.load, path);
    bind(lib, "tsp_unload", m.unload, path);
    bind(lib, "tsp_vocab_size", m.vocab_size, path);
    bind(lib, "tsp_eos_id", m.eos_id, path);
    bind(lib, "tsp_encode", m.encode, path);
    bind(lib, "tsp_decode", m.decode, path);
    bind(lib, "tsp_free", m.free, path);
    return m;
  }
  throw_error(
      ErrorCode::not_available, kOp,
      fmt::format("the SentencePiece module {} was not found (searched {}); build the target "
                  "tandem_sentencepiece, or set TANDEM_SENTENCEPIECE_MODULE to its path",
                  kName, fmt::join(tried, ", ")));
}

}  // namespace

const SentencePieceModule& sentencepiece_module() {
  static std::mutex mu;
  static SentencePieceModule module{};
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded) {
    module = load_module();
    loaded = true;
  }
  return module;
}

}  // namespace tandem::data::tokens
