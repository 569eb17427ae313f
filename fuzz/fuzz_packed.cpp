// Fuzz target: a packed data set (manifest.json + one shard) through PackedDataset, every
// record read back with its CRC checked. Input layout: a u32 little-endian manifest length,
// the manifest's bytes, then the shard's bytes (written as the file the manifest names when it
// names one, else "train-00000.tpk"). Errors: tandem::Error is expected; see fuzz_target.h.
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "tandem/data/packed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::data;
  if (size < 4) return 0;
  const size_t mlen =
      std::min<size_t>(size - 4, data[0] | data[1] << 8 | data[2] << 16 | size_t{data[3]} << 24);
  const uint8_t* manifest = data + 4;
  const uint8_t* shard = manifest + mlen;
  const size_t shard_size = size - 4 - mlen;
  std::string shard_name = "train-00000.tpk";
  try {  // only to pick the file name; the reader parses the manifest itself
    const auto m = nlohmann::json::parse(manifest, manifest + mlen);
    const std::string f =
        m.at("splits").at("train").at("shards").at(0).at("file").get<std::string>();
    if (!f.empty() && f.find('/') == std::string::npos && f.size() < 64 && f != "manifest.json")
      shard_name = f;
  } catch (const nlohmann::json::exception&) {
  }
  tandem::fuzz::write_scratch("manifest.json", manifest, mlen);
  tandem::fuzz::write_scratch(shard_name, shard, shard_size);
  const std::string& dir = tandem::fuzz::scratch_dir();
  return tandem::fuzz::expect_error_or_ok([&] {
    const PackedDataset d(dir, Split::train, PackedOptions{});
    std::vector<uint8_t> scratch;
    for (int64_t i = 0; i < d.size(); ++i) (void)d.get(i, scratch);
  });
}
