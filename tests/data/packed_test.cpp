// Packed datasets: folder -> pack -> read gives the same bytes and labels; raw datasets pack
// with their dims; shards split at the size limit; a flipped byte fails its CRC at get(); a
// truncated shard, a bad magic and an index past the end fail at open, naming the shard.
#include "tandem/data/packed.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "data/dataset_test_util.h"
#include "data/packed/packed_layout.h"
#include "data/temp_dir.h"
#include "tandem/data/cifar.h"
#include "tandem/data/image_codec.h"
#include "tandem/data/image_folder.h"

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// train/{cat,dog}, val/{cat,dog}: 7 + 3 files of different sizes.
void make_folder(const TempDir& dir) {
  for (int i = 0; i < 4; ++i) put(dir.file(fmt::format("src/train/cat/{}.jpg", i)), fake_jpeg(i, 50 + 37 * i));
  for (int i = 0; i < 3; ++i) put(dir.file(fmt::format("src/train/dog/{}.png", i)), fake_png(10 + i, 90 + 11 * i));
  put(dir.file("src/val/cat/a.png"), fake_png(20, 10));
  put(dir.file("src/val/dog/b.jpg"), fake_jpeg(21, 300));
  put(dir.file("src/val/dog/c.jpg"), fake_jpeg(22, 1));
}

void expect_same(const data::Dataset& a, const data::Dataset& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.num_classes(), b.num_classes());
  EXPECT_EQ(a.dims(), b.dims());
  for (int64_t c = 0; c < a.num_classes(); ++c) EXPECT_EQ(a.class_name(c), b.class_name(c));
  std::vector<uint8_t> sa, sb;
  for (int64_t i = 0; i < a.size(); ++i) {
    const data::Sample x = a.get(i, sa), y = b.get(i, sb);
    const size_t n = x.encoding == data::Encoding::raw ? static_cast<size_t>(a.dims().numel()) : x.size;
    EXPECT_EQ(x.label, y.label) << i;
    EXPECT_EQ(x.encoding, y.encoding) << i;
    if (x.encoding != data::Encoding::raw) {
      EXPECT_EQ(x.size, y.size) << i;
    }
    EXPECT_TRUE(std::equal(x.pixels, x.pixels + n, y.pixels)) << i;
    EXPECT_EQ(b.label(i), x.label);
  }
}

// Overwrites `n` bytes at `offset` of `path`.
void poke(const std::string& path, uint64_t offset, const Bytes& bytes) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Packs two CIFAR-10 records (a test split) into dir/out.
void pack_two_cifar_records(const TempDir& dir) {
  Bytes rec;
  for (int i = 0; i < 2; ++i) {
    rec.push_back(static_cast<uint8_t>(i));
    const Bytes px = pattern(3072, static_cast<uint32_t>(i));
    rec.insert(rec.end(), px.begin(), px.end());
  }
  write_file(dir.file("test_batch.bin"), rec);
  const data::Cifar10 test(dir.str(), data::Split::test);
  data::write_packed({{"test", &test}}, dir.file("out"));
}

}  // namespace

TEST(Packed, FolderRoundTripKeepsBytesLabelsAndNames) {
  TempDir dir;
  make_folder(dir);
  const data::ImageFolder train(dir.file("src"), data::Split::train);
  const data::ImageFolder val(dir.file("src"), data::Split::test);
  // 200-byte shards: the train split needs several.
  const data::PackResult r = data::write_packed({{"train", &train}, {"test", &val}}, dir.file("out"), {200});
  EXPECT_EQ(r.records, 10);
  EXPECT_GT(r.shards, 3);
  const data::PackedDataset ptrain(dir.file("out"), data::Split::train);
  const data::PackedDataset pval(dir.file("out"), data::Split::test);
  expect_same(train, ptrain);
  expect_same(val, pval);
  EXPECT_GT(ptrain.shards().size(), 2u);
  EXPECT_EQ(ptrain.dims(), (data::ImageDims{3, 0, 0}));
  // Samples point into the mapping, not the scratch buffer; source names the shard.
  std::vector<uint8_t> scratch;
  const data::Sample s = ptrain.get(6, scratch);
  EXPECT_TRUE(scratch.empty());
  EXPECT_EQ(s.encoding, data::Encoding::png);
  EXPECT_EQ(std::string(s.source).rfind(dir.file("out/train-"), 0), 0u) << s.source;
  // Records per 128 KiB at the mean record size (about 137 bytes here).
  uint64_t total = 0;
  for (int64_t i = 0; i < ptrain.size(); ++i) total += ptrain.get(i, scratch).size;
  EXPECT_EQ(ptrain.block_size(), static_cast<int64_t>(data::kPackedBlockBytes * 7 / total));
  EXPECT_THROW(ptrain.get(7, scratch), Error);
}

TEST(Packed, RawDatasetPacksWithItsDims) {
  TempDir dir;
  Bytes rec;
  for (int i = 0; i < 5; ++i) {
    rec.push_back(static_cast<uint8_t>(i % 10));
    const Bytes px = pattern(3072, static_cast<uint32_t>(i));
    rec.insert(rec.end(), px.begin(), px.end());
  }
  write_file(dir.file("test_batch.bin"), rec);
  const data::Cifar10 test(dir.str(), data::Split::test);
  data::write_packed({{"test", &test}}, dir.file("out"));
  const data::PackedDataset p(dir.file("out"), data::Split::test);
  EXPECT_EQ(p.dims(), (data::ImageDims{3, 32, 32}));
  expect_same(test, p);
  EXPECT_EQ(p.block_size(), 128 * 1024 / 3072);
  const std::string msg = error_of([&] { data::PackedDataset(dir.file("out"), data::Split::train); }, ErrorCode::format);
  EXPECT_NE(msg.find("no split \"train\""), std::string::npos) << msg;
}

// Manifest dims are bounded before any product: [16, 3610991507, 4150654891] wraps the byte
// count of a record to 784 in 64 bits (a crafted pack was accepted by `tandem inspect`), and a
// large product overflows int64 (UBSan).
TEST(Packed, ManifestDimsOutOfRangeAreRefusedByName) {
  TempDir dir;
  pack_two_cifar_records(dir);
  const std::string manifest = dir.file("out/manifest.json");
  const Bytes good = read_file(manifest);
  const std::string text(good.begin(), good.end());
  ASSERT_NE(text.find("\"dims\""), std::string::npos) << text;
  for (const char* dims : {"[16,3610991507,4150654891]", "[0,32,32]", "[5,32,32]", "[3,0,32]", "[3,65536,1]",
                           "[3,-1,-1]"}) {
    // Replace the dims array, whatever its formatting.
    const size_t key = text.find("\"dims\"");
    const size_t open = text.find('[', key), close = text.find(']', open);
    std::string bad = text.substr(0, open) + dims + text.substr(close + 1);
    write_file(manifest, Bytes(bad.begin(), bad.end()));
    const std::string msg =
        error_of([&] { data::PackedDataset(dir.file("out"), data::Split::test); }, ErrorCode::format);
    EXPECT_NE(msg.find("manifest.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected [C, H, W] with C in 1..4 and H, W in 1..65535"), std::string::npos) << dims << ": "
                                                                                                     << msg;
  }
  write_file(manifest, good);
  EXPECT_EQ(data::PackedDataset(dir.file("out"), data::Split::test).size(), 2);
}

TEST(Packed, ShardOfAnotherPackWithTheSameSizeIsRefused) {
  // Two raw packs of the same shape: their shards have the same size and record count, so only
  // the manifest's index CRC tells them apart.
  TempDir dir;
  for (const char* name : {"a", "b"}) {
    Bytes rec;
    for (int i = 0; i < 4; ++i) {
      rec.push_back(static_cast<uint8_t>((i + name[0]) % 10));
      const Bytes px = pattern(3072, static_cast<uint32_t>(i + 7 * name[0]));
      rec.insert(rec.end(), px.begin(), px.end());
    }
    put(dir.file(fmt::format("{}/test_batch.bin", name)), rec);
    const data::Cifar10 test(dir.file(name), data::Split::test);
    data::write_packed({{"test", &test}}, dir.file(fmt::format("{}/out", name)));
  }
  const std::string shard = dir.file("a/out/test-00000.tpk");
  ASSERT_EQ(fs::file_size(shard), fs::file_size(dir.file("b/out/test-00000.tpk")));
  fs::copy_file(dir.file("b/out/test-00000.tpk"), shard, fs::copy_options::overwrite_existing);
  const std::string msg =
      error_of([&] { data::PackedDataset(dir.file("a/out"), data::Split::test); }, ErrorCode::format);
  EXPECT_NE(msg.find(shard + ": shard from another pack: its index CRC32 is"), std::string::npos) << msg;
  // The other pack itself still opens.
  EXPECT_EQ(data::PackedDataset(dir.file("b/out"), data::Split::test).size(), 4);
}

TEST(Packed, OutputFolderMustBeNewEmptyOrAnEarlierPack) {
  TempDir dir;
  make_folder(dir);
  const data::ImageFolder train(dir.file("src"), data::Split::train);
  // A folder with a file of its own: refused, left as it was.
  put(dir.file("other/notes.txt"), {'x'});
  const std::string msg =
      error_of([&] { data::write_packed({{"train", &train}}, dir.file("other")); }, ErrorCode::invalid_argument);
  EXPECT_NE(msg.find(dir.file("other") + ": expected a new or empty folder, or one holding an earlier pack, found " +
                     dir.file("other/notes.txt")),
            std::string::npos)
      << msg;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("other")), fs::directory_iterator()), 1);
  // An earlier pack of more shards: replaced, its extra shards removed.
  EXPECT_GT(data::write_packed({{"train", &train}}, dir.file("out"), {200}).shards, 2);
  EXPECT_EQ(data::write_packed({{"train", &train}}, dir.file("out")).shards, 1);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.file("out"))) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "train-00000.tpk"}));
  expect_same(train, data::PackedDataset(dir.file("out"), data::Split::train));
}

TEST(Packed, FlippedByteFailsItsCrcAtGet) {
  TempDir dir;
  make_folder(dir);
  const data::ImageFolder train(dir.file("src"), data::Split::train);
  data::write_packed({{"train", &train}}, dir.file("out"));
  // Record 2 starts after the 64-byte header and records 0 and 1.
  std::vector<uint8_t> scratch;
  const uint64_t at = data::kPackedHeaderBytes + train.get(0, scratch).size + train.get(1, scratch).size + 5;
  const std::string shard = dir.file("out/train-00000.tpk");
  const Bytes orig = read_file(shard);
  poke(shard, at, {static_cast<uint8_t>(orig[at] ^ 0x10)});
  const data::PackedDataset p(dir.file("out"), data::Split::train);
  EXPECT_NO_THROW(p.get(1, scratch));
  const std::string msg = error_of([&] { p.get(2, scratch); }, ErrorCode::format);
  EXPECT_NE(msg.find(shard + ": record at offset"), std::string::npos) << msg;
  EXPECT_NE(msg.find("split index 2): CRC32 mismatch"), std::string::npos) << msg;
  // Without verification the (corrupt) bytes come back as stored.
  const data::PackedDataset q(dir.file("out"), data::Split::train, {false});
  EXPECT_EQ(q.get(2, scratch).pixels[5], orig[at] ^ 0x10);
}

TEST(Packed, BadShardsFailAtOpenNamingTheShard) {
  TempDir dir;
  make_folder(dir);
  const data::ImageFolder train(dir.file("src"), data::Split::train);
  data::write_packed({{"train", &train}}, dir.file("out"));
  const std::string shard = dir.file("out/train-00000.tpk");
  const Bytes good = read_file(shard);
  auto open_error = [&] {
    return error_of([&] { data::PackedDataset(dir.file("out"), data::Split::train); }, ErrorCode::format);
  };
  // Truncated.
  write_file(shard, Bytes(good.begin(), good.end() - 10));
  std::string msg = open_error();
  EXPECT_NE(msg.find(shard + ": truncated shard"), std::string::npos) << msg;
  // Bad magic.
  Bytes b = good;
  b[0] = 'X';
  write_file(shard, b);
  msg = open_error();
  EXPECT_NE(msg.find(shard + ": bad magic"), std::string::npos) << msg;
  // Unsupported version (with a valid header CRC, so the version is what is reported).
  b = good;
  data::packed::Header h{2, 3, 0, 0, 2};
  const auto hb = data::packed::encode_header(h);
  std::copy(hb.begin(), hb.end(), b.begin());
  write_file(shard, b);
  msg = open_error();
  EXPECT_NE(msg.find("unsupported shard version 2"), std::string::npos) << msg;
  // Index past the end: a footer (valid CRC) whose index offset leaves no room for the index.
  b = good;
  const uint64_t n = data::packed::get_u64(good.data() + good.size() - 32);
  const auto fb = data::packed::encode_footer({n, good.size() - 40, 0});
  std::copy(fb.begin(), fb.end(), b.end() - 32);
  write_file(shard, b);
  msg = open_error();
  EXPECT_NE(msg.find(shard + ": index past the end"), std::string::npos) << msg;
  // A flipped index byte: the index CRC.
  b = good;
  b[data::packed::get_u64(good.data() + good.size() - 24) + 3] ^= 1;
  write_file(shard, b);
  msg = open_error();
  EXPECT_NE(msg.find(shard + ": index CRC32 mismatch"), std::string::npos) << msg;
  // Missing shard: io.
  fs::remove(shard);
  msg = error_of([&] { data::PackedDataset(dir.file("out"), data::Split::train); }, ErrorCode::io);
  EXPECT_NE(msg.find(shard), std::string::npos) << msg;
  // No manifest: io; a broken one: format.
  error_of([&] { data::PackedDataset(dir.str(), data::Split::train); }, ErrorCode::io);
  write_file(dir.file("out/manifest.json"), {'{', '"'});
  error_of([&] { data::PackedDataset(dir.file("out"), data::Split::train); }, ErrorCode::format);
}

TEST(Packed, ZeroShardSizeIsRefused) {
  TempDir dir;
  make_folder(dir);
  const data::ImageFolder train(dir.file("src"), data::Split::train);
  error_of([&] { data::write_packed({{"train", &train}}, dir.file("out"), {0}); }, ErrorCode::invalid_argument);
  EXPECT_FALSE(fs::exists(dir.file("out/manifest.json")));
}

TEST(Packed, RealImagesDecodeTheSameAfterPacking) {
  TempDir dir;
  // JPEG and PNG images of different sizes in two classes.
  for (int i = 0; i < 6; ++i) {
    const int w = 8 + 5 * i, h = 30 - 3 * i;
    const Bytes rgb = pattern(static_cast<size_t>(w * h * 3), static_cast<uint32_t>(i));
    const Bytes file = i % 2 ? data::encode_png(rgb.data(), w, h) : data::encode_jpeg(rgb.data(), w, h, 90);
    put(dir.file(fmt::format("src/{}/{}.{}", i < 3 ? "a" : "b", i, i % 2 ? "png" : "jpg")), file);
  }
  const data::ImageFolder folder(dir.file("src"));
  data::write_packed({{"train", &folder}}, dir.file("out"));
  const data::PackedDataset packed(dir.file("out"), data::Split::train);
  ASSERT_EQ(packed.size(), 6);
  std::vector<uint8_t> s1, s2, rgb1, rgb2;
  for (int64_t i = 0; i < 6; ++i) {
    const data::Sample a = folder.get(i, s1), b = packed.get(i, s2);
    const data::ImageInfo ia = data::decode_image(a.pixels, a.size, a.source, {1, 1}, rgb1);
    const data::ImageInfo ib = data::decode_image(b.pixels, b.size, b.source, {1, 1}, rgb2);
    EXPECT_EQ(ia.width, 8 + 5 * i);
    EXPECT_EQ(ib.width, ia.width);
    EXPECT_EQ(ib.height, 30 - 3 * i);
    EXPECT_EQ(ib.encoding, i % 2 ? data::Encoding::png : data::Encoding::jpeg);
    EXPECT_EQ(rgb1, rgb2) << i;
    EXPECT_EQ(data::read_image_info(b.pixels, b.size, b.source).height, 30 - 3 * i);
  }
}

// A manifest that lists one shard many times (each a mapping: 65,534 of them aborted the
// process at the system's map limit) or more shards than a split may map, or numbers that are
// not integers, is refused by name before any shard is mapped.
TEST(Packed, ManifestShardListsAndNumbersAreChecked) {
  TempDir dir;
  pack_two_cifar_records(dir);
  const std::string manifest = dir.file("out/manifest.json");
  const Bytes good = read_file(manifest);
  nlohmann::json m = nlohmann::json::parse(good.begin(), good.end());
  const auto refused = [&](const nlohmann::json& bad, const std::string& want) {
    const std::string text = bad.dump();
    write_file(manifest, Bytes(text.begin(), text.end()));
    const std::string msg =
        error_of([&] { data::PackedDataset(dir.file("out"), data::Split::test); }, ErrorCode::format);
    EXPECT_NE(msg.find(want), std::string::npos) << want << ": " << msg;
  };
  nlohmann::json twice = m;
  auto& shards = twice["splits"]["test"]["shards"];
  shards.push_back(shards[0]);
  refused(twice, "shard 'test-00000.tpk' listed twice");
  nlohmann::json many = m;
  many["splits"]["test"]["shards"] = nlohmann::json::array();
  for (int i = 0; i < 16385; ++i) many["splits"]["test"]["shards"].push_back(m["splits"]["test"]["shards"][0]);
  refused(many, "16385 shards: expected a list of at most 16384");
  nlohmann::json frac = m;
  frac["dims"][1] = 28.9;
  refused(frac, "\"dims\"[1] 28.9: expected an integer");
  nlohmann::json wrap = m;
  wrap["splits"]["test"]["records"] = std::numeric_limits<uint64_t>::max();
  refused(wrap, "\"records\" 18446744073709551615: expected an integer");
  write_file(manifest, good);
  EXPECT_EQ(data::PackedDataset(dir.file("out"), data::Split::test).size(), 2);
}
