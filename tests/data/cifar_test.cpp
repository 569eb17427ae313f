// CIFAR-10 / CIFAR-100 binary files: records, labels (one byte vs two), class names, and the
// errors for a wrong file size, a bad label and a missing file.
#include "tandem/data/cifar.h"

#include <gtest/gtest.h>

#include "data/dataset_test_util.h"
#include "data/temp_dir.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::testing;

namespace {

// `labels[i]` label bytes then 3072 pixel bytes pattern(3072, salt + i) per record.
Bytes records(const std::vector<Bytes>& labels, uint32_t salt) {
  Bytes out;
  for (size_t i = 0; i < labels.size(); ++i) {
    out.insert(out.end(), labels[i].begin(), labels[i].end());
    const Bytes px = pattern(3072, salt + static_cast<uint32_t>(i));
    out.insert(out.end(), px.begin(), px.end());
  }
  return out;
}

void write_cifar10(const TempDir& dir) {
  for (int b = 1; b <= 5; ++b)
    write_file(dir.file(fmt::format("data_batch_{}.bin", b)),
               records({{static_cast<uint8_t>(b)}, {static_cast<uint8_t>(9 - b)}}, static_cast<uint32_t>(10 * b)));
  write_file(dir.file("test_batch.bin"), records({{3}, {0}, {9}}, 100));
}

}  // namespace

TEST(Cifar10, ReadsRecordsThroughAllBatchesInOrder) {
  TempDir dir;
  write_cifar10(dir);
  const data::Cifar10 train(dir.str(), data::Split::train);
  const data::Cifar10 test(dir.str(), data::Split::test);
  ASSERT_EQ(train.size(), 10);
  ASSERT_EQ(test.size(), 3);
  EXPECT_EQ(train.dims(), (data::ImageDims{3, 32, 32}));
  EXPECT_EQ(train.num_classes(), 10);
  std::vector<uint8_t> scratch;
  // record 2 of batch 4 is sample 7: label 9 - 4, pixels pattern(3072, 41)
  const data::Sample s = train.get(7, scratch);
  EXPECT_EQ(s.label, 5);
  EXPECT_EQ(s.encoding, data::Encoding::raw);
  const Bytes px = pattern(3072, 41);
  EXPECT_TRUE(std::equal(px.begin(), px.end(), s.pixels));
  EXPECT_EQ(train.label(0), 1);
  EXPECT_EQ(test.get(2, scratch).label, 9);
  EXPECT_EQ(test.label(1), 0);
  EXPECT_EQ(train.class_name(3), "3");  // no batches.meta.txt
  EXPECT_THROW(train.get(10, scratch), Error);
}

TEST(Cifar10, ClassNamesFromBatchesMeta) {
  TempDir dir;
  write_cifar10(dir);
  const std::string names = "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n";
  write_file(dir.file("batches.meta.txt"), Bytes(names.begin(), names.end()));
  const data::Cifar10 test(dir.str(), data::Split::test);
  EXPECT_EQ(test.class_name(0), "airplane");
  EXPECT_EQ(test.class_name(9), "truck");
  EXPECT_THROW(test.class_name(10), Error);
}

TEST(Cifar10, WrongSizeNamesFileSizeAndRecord) {
  TempDir dir;
  write_cifar10(dir);
  Bytes b = records({{1}, {2}}, 7);
  b.pop_back();
  write_file(dir.file("data_batch_3.bin"), b);
  const std::string msg = error_of([&] { data::Cifar10(dir.str(), data::Split::train); }, ErrorCode::format);
  EXPECT_NE(msg.find("data_batch_3.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3073-byte record"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found 6145 bytes"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  // A CIFAR-100 file (3074-byte records) is the wrong size for CIFAR-10 too.
  write_file(dir.file("test_batch.bin"), records({{1, 2}, {3, 4}, {5, 6}}, 1));
  error_of([&] { data::Cifar10(dir.str(), data::Split::test); }, ErrorCode::format);
  write_file(dir.file("test_batch.bin"), {});
  error_of([&] { data::Cifar10(dir.str(), data::Split::test); }, ErrorCode::format);
}

TEST(Cifar10, BadLabelAndMissingFile) {
  TempDir dir;
  write_cifar10(dir);
  write_file(dir.file("test_batch.bin"), records({{3}, {10}}, 1));
  const std::string msg = error_of([&] { data::Cifar10(dir.str(), data::Split::test); }, ErrorCode::format);
  EXPECT_NE(msg.find("test_batch.bin: record 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found 10"), std::string::npos) << msg;
  std::filesystem::remove(dir.file("data_batch_5.bin"));
  const std::string io = error_of([&] { data::Cifar10(dir.str(), data::Split::train); }, ErrorCode::io);
  EXPECT_NE(io.find("data_batch_5.bin"), std::string::npos) << io;
  error_of([&] { data::Cifar10(dir.file("nope"), data::Split::train); }, ErrorCode::io);
}

TEST(Cifar100, FineAndCoarseLabelsAreTheSecondAndFirstByte) {
  TempDir dir;
  write_file(dir.file("train.bin"), records({{19, 99}, {0, 42}, {7, 3}}, 5));
  write_file(dir.file("test.bin"), records({{2, 50}}, 9));
  const std::string fine = "apple\naquarium_fish\n";
  write_file(dir.file("coarse_label_names.txt"), Bytes(fine.begin(), fine.end()));  // wrong count: ignored
  const data::Cifar100 f(dir.str(), data::Split::train);
  const data::Cifar100 c(dir.str(), data::Split::train, data::CifarLabel::coarse);
  ASSERT_EQ(f.size(), 3);
  EXPECT_EQ(f.num_classes(), 100);
  EXPECT_EQ(c.num_classes(), 20);
  std::vector<uint8_t> scratch;
  EXPECT_EQ(f.get(0, scratch).label, 99);
  EXPECT_EQ(c.get(0, scratch).label, 19);
  EXPECT_EQ(f.label(1), 42);
  EXPECT_EQ(c.label(2), 7);
  const Bytes px = pattern(3072, 6);  // record 1: pixels start after two label bytes
  EXPECT_TRUE(std::equal(px.begin(), px.end(), f.get(1, scratch).pixels));
  EXPECT_EQ(c.class_name(1), "1");
  EXPECT_EQ(data::Cifar100(dir.str(), data::Split::test).label(0), 50);
}

TEST(Cifar100, ClassNamesAndBothLabelBytesChecked) {
  TempDir dir;
  std::string coarse;
  for (int i = 0; i < 20; ++i) coarse += fmt::format("super{}\r\n", i);
  write_file(dir.file("coarse_label_names.txt"), Bytes(coarse.begin(), coarse.end()));
  write_file(dir.file("train.bin"), records({{1, 2}}, 1));
  EXPECT_EQ(data::Cifar100(dir.str(), data::Split::train, data::CifarLabel::coarse).class_name(19), "super19");
  // A coarse label out of range is refused even when the fine one is used, and vice versa.
  write_file(dir.file("train.bin"), records({{1, 2}, {20, 3}}, 1));
  std::string msg = error_of([&] { data::Cifar100(dir.str(), data::Split::train); }, ErrorCode::format);
  EXPECT_NE(msg.find("coarse label in [0, 20), found 20"), std::string::npos) << msg;
  write_file(dir.file("train.bin"), records({{1, 100}}, 1));
  msg = error_of([&] { data::Cifar100(dir.str(), data::Split::train, data::CifarLabel::coarse); }, ErrorCode::format);
  EXPECT_NE(msg.find("fine label in [0, 100), found 100"), std::string::npos) << msg;
  // A CIFAR-10 file is the wrong size for CIFAR-100.
  write_file(dir.file("train.bin"), records({{1}, {2}}, 1));
  msg = error_of([&] { data::Cifar100(dir.str(), data::Split::train); }, ErrorCode::format);
  EXPECT_NE(msg.find("3074-byte record (2 label bytes"), std::string::npos) << msg;
}
