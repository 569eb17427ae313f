// ImageFolder: torchvision's layout (sorted classes and files), train/val folders, the
// stratified val_split (deterministic by seed), content sniffed at get(), and the errors for
// an empty class folder, a non-image file, an unreadable file or folder, a missing folder.
#include "tandem/data/image_folder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "data/dataset_test_util.h"
#include "data/temp_dir.h"
#include "tandem/data/sampler.h"

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// Whether chmod 000 keeps this process out (not so for root).
bool permissions_bite(const TempDir& dir) {
  const std::string p = dir.file("probe");
  write_file(p, {1});
  ::chmod(p.c_str(), 0);
  const bool bites = ::access(p.c_str(), R_OK) != 0;
  ::chmod(p.c_str(), 0644);
  fs::remove(p);
  return bites;
}

}  // namespace

TEST(ImageFolder, ClassesAndFilesSortedInByteOrder) {
  TempDir dir;
  // 'B' < '_' < 'a' in byte order; "10" < "9".
  put(dir.file("root/dog/b.jpg"), fake_jpeg(1));
  put(dir.file("root/dog/A.PNG"), fake_png(2));
  put(dir.file("root/cat/9.jpeg"), fake_jpeg(3));
  put(dir.file("root/cat/10.Jpg"), fake_png(4));  // a .jpg holding a PNG: judged by content
  put(dir.file("root/Bird/x.png"), fake_png(5));
  put(dir.file("root/cat/.DS_Store"), {0});      // hidden: skipped
  put(dir.file("root/README.txt"), {0});         // files in the root: ignored
  const data::ImageFolder f(dir.file("root"));
  ASSERT_EQ(f.num_classes(), 3);
  EXPECT_EQ(f.classes(), (std::vector<std::string>{"Bird", "cat", "dog"}));
  EXPECT_EQ(f.class_name(1), "cat");
  ASSERT_EQ(f.size(), 5);
  EXPECT_EQ(f.dims(), (data::ImageDims{3, 0, 0}));
  const std::vector<std::string> want = {"root/Bird/x.png", "root/cat/10.Jpg", "root/cat/9.jpeg", "root/dog/A.PNG",
                                         "root/dog/b.jpg"};
  const std::vector<int64_t> labels = {0, 1, 1, 2, 2};
  for (int64_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(f.path(i), dir.file(want[static_cast<size_t>(i)]));
    EXPECT_EQ(f.label(i), labels[static_cast<size_t>(i)]);
  }
  std::vector<uint8_t> scratch;
  const data::Sample s = f.get(1, scratch);
  EXPECT_EQ(s.encoding, data::Encoding::png);
  EXPECT_EQ(s.label, 1);
  const Bytes bytes = fake_png(4);
  ASSERT_EQ(s.size, bytes.size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), s.pixels));
  EXPECT_EQ(s.pixels, scratch.data());
  EXPECT_STREQ(s.source, dir.file("root/cat/10.Jpg").c_str());
  EXPECT_EQ(f.get(4, scratch).encoding, data::Encoding::jpeg);
  EXPECT_THROW(f.get(5, scratch), Error);
}

TEST(ImageFolder, TrainAndValFolders) {
  TempDir dir;
  put(dir.file("train/a/1.jpg"), fake_jpeg(1));
  put(dir.file("train/a/2.jpg"), fake_jpeg(2));
  put(dir.file("train/b/1.jpg"), fake_jpeg(3));
  put(dir.file("val/a/3.jpg"), fake_jpeg(4));
  put(dir.file("val/b/4.jpg"), fake_jpeg(5));
  put(dir.file("val/b/5.jpg"), fake_jpeg(6));
  const data::ImageFolder train(dir.str(), data::Split::train);
  const data::ImageFolder val(dir.str(), data::Split::test);
  EXPECT_EQ(train.size(), 3);
  EXPECT_EQ(val.size(), 3);
  EXPECT_EQ(val.root(), dir.file("val"));
  EXPECT_EQ(val.label(0), 0);
  EXPECT_EQ(val.label(2), 1);
  // val_split does not apply to a train/val layout.
  error_of([&] { data::ImageFolder(dir.str(), data::Split::train, {0.2, 0}); }, ErrorCode::invalid_argument);
  // Different classes in val/.
  put(dir.file("val/c/6.jpg"), fake_jpeg(7));
  const std::string msg = error_of([&] { data::ImageFolder(dir.str(), data::Split::test); }, ErrorCode::format);
  EXPECT_NE(msg.find("expected the class folders of"), std::string::npos) << msg;
}

TEST(ImageFolder, ValSplitIsStratifiedDeterministicAndDisjoint) {
  TempDir dir;
  const int counts[3] = {10, 7, 1};
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < counts[c]; ++i) put(dir.file(fmt::format("c{}/{:02d}.png", c, i)), fake_png(c * 100 + i));
  const data::ImageFolderOptions opt{0.3, 7};
  const data::ImageFolder train(dir.str(), data::Split::train, opt);
  const data::ImageFolder test(dir.str(), data::Split::test, opt);
  // round(0.3 * n): 3 of 10, 2 of 7, 0 of 1.
  std::vector<int> held(3, 0);
  for (int64_t i = 0; i < test.size(); ++i) ++held[static_cast<size_t>(test.label(i))];
  EXPECT_EQ(held, (std::vector<int>{3, 2, 0}));
  EXPECT_EQ(train.size() + test.size(), 18);
  EXPECT_EQ(train.num_classes(), 3);
  EXPECT_EQ(test.num_classes(), 3);
  std::set<std::string> all;
  for (int64_t i = 0; i < train.size(); ++i) all.insert(train.path(i));
  for (int64_t i = 0; i < test.size(); ++i) all.insert(test.path(i));
  EXPECT_EQ(all.size(), 18u);  // disjoint, together every file
  for (int64_t i = 1; i < test.size(); ++i) EXPECT_LT(test.path(i - 1), test.path(i));  // byte order kept
  // The same seed gives the same files; class c's share depends on (seed, c) only.
  const data::ImageFolder again(dir.str(), data::Split::test, opt);
  ASSERT_EQ(again.size(), test.size());
  for (int64_t i = 0; i < test.size(); ++i) EXPECT_EQ(again.path(i), test.path(i));
  std::vector<int64_t> perm;
  data::random_permutation(10, 7, 0, perm);
  std::set<std::string> want;
  for (int k = 0; k < 3; ++k) want.insert(dir.file(fmt::format("c0/{:02d}.png", perm[static_cast<size_t>(k)])));
  EXPECT_EQ(std::set<std::string>({test.path(0), test.path(1), test.path(2)}), want);
  // Another seed picks other files (for these sizes and seeds).
  const data::ImageFolder other(dir.str(), data::Split::test, {0.3, 8});
  bool differs = false;
  for (int64_t i = 0; i < other.size(); ++i) differs = differs || other.path(i) != test.path(i);
  EXPECT_TRUE(differs);
  // Flat folder: no test split without val_split; bad fractions.
  error_of([&] { data::ImageFolder(dir.str(), data::Split::test); }, ErrorCode::invalid_argument);
  error_of([&] { data::ImageFolder(dir.str(), data::Split::train, {1.0, 0}); }, ErrorCode::invalid_argument);
  error_of([&] { data::ImageFolder(dir.str(), data::Split::train, {-0.1, 0}); }, ErrorCode::invalid_argument);
  EXPECT_EQ(data::ImageFolder(dir.str(), data::Split::train).size(), 18);
}

TEST(ImageFolder, TrainFolderWithoutValIsSplitByValSplit) {
  TempDir dir;
  for (int i = 0; i < 4; ++i) put(dir.file(fmt::format("train/a/{}.jpg", i)), fake_jpeg(i));
  for (int i = 0; i < 2; ++i) put(dir.file(fmt::format("train/b/{}.png", i)), fake_png(10 + i));
  // Without val_split: the train split is all of train/ (classes a and b, not one class "train").
  const data::ImageFolder all(dir.str(), data::Split::train);
  EXPECT_EQ(all.root(), dir.file("train"));
  EXPECT_EQ(all.num_classes(), 2);
  EXPECT_EQ(all.size(), 6);
  const std::string msg = error_of([&] { data::ImageFolder(dir.str(), data::Split::test); }, ErrorCode::invalid_argument);
  EXPECT_NE(msg.find(dir.str() + ": no test split: expected " + dir.str() + "/train and " + dir.str() +
                     "/val, or a fraction to hold out of train/ (--val-split)"),
            std::string::npos)
      << msg;
  // With it: train/ is split per class, round(0.5 * n) held out.
  const data::ImageFolder test(dir.str(), data::Split::test, {0.5, 0});
  const data::ImageFolder train(dir.str(), data::Split::train, {0.5, 0});
  EXPECT_EQ(test.size(), 3);
  EXPECT_EQ(train.size(), 3);
  EXPECT_EQ(test.class_name(1), "b");
}

TEST(ImageFolder, LayoutErrorsNameThePath) {
  TempDir dir;
  error_of([&] { data::ImageFolder(dir.file("missing")); }, ErrorCode::io);
  std::string msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::format);
  EXPECT_NE(msg.find("no class folders"), std::string::npos) << msg;
  put(dir.file("a/1.jpg"), fake_jpeg(1));
  fs::create_directories(dir.file("b"));
  msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::format);
  EXPECT_NE(msg.find(dir.file("b") + ": empty class folder"), std::string::npos) << msg;
  put(dir.file("b/notes.txt"), {1, 2});
  msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::format);
  EXPECT_NE(msg.find(dir.file("b/notes.txt") + ": expected an image file"), std::string::npos) << msg;
  fs::remove(dir.file("b/notes.txt"));
  fs::create_directories(dir.file("b/sub"));
  msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::format);
  EXPECT_NE(msg.find(dir.file("b/sub")), std::string::npos) << msg;
  fs::remove(dir.file("b/sub"));
  // A FIFO named like an image: refused at open, never opened (which would block).
  ASSERT_EQ(::mkfifo(dir.file("b/pipe.jpg").c_str(), 0644), 0);
  msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::io);
  EXPECT_NE(msg.find(dir.file("b/pipe.jpg") + ": expected a regular file, found a special file"), std::string::npos)
      << msg;
  fs::remove(dir.file("b/pipe.jpg"));
  // Links: a dangling one, and a loop (named as such, not as a broken link).
  fs::create_symlink("missing.jpg", dir.file("b/dangling.jpg"));
  msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::io);
  EXPECT_NE(msg.find(dir.file("b/dangling.jpg") + ": expected a regular file, found a broken link"), std::string::npos)
      << msg;
  fs::remove(dir.file("b/dangling.jpg"));
  fs::create_symlink("loop2.jpg", dir.file("b/loop1.jpg"));
  fs::create_symlink("loop1.jpg", dir.file("b/loop2.jpg"));
  msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::io);
  EXPECT_NE(msg.find(dir.file("b/loop1.jpg") +
                     ": expected a regular file, found a link that cannot be followed: Too many levels of symbolic links"),
            std::string::npos)
      << msg;
}

TEST(ImageFolder, NonImageBytesAndUnreadableFilesFailAtGet) {
  TempDir dir;
  put(dir.file("a/1.jpg"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  put(dir.file("a/2.png"), fake_png(1));
  const data::ImageFolder f(dir.str());
  std::vector<uint8_t> scratch;
  std::string msg = error_of([&] { f.get(0, scratch); }, ErrorCode::format);
  EXPECT_NE(msg.find(dir.file("a/1.jpg") + ": expected JPEG or PNG bytes"), std::string::npos) << msg;
  fs::remove(dir.file("a/2.png"));
  msg = error_of([&] { f.get(1, scratch); }, ErrorCode::io);
  EXPECT_NE(msg.find(dir.file("a/2.png")), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
}

TEST(ImageFolder, UnreadableFileAndClassFolder) {
  TempDir dir;
  if (!permissions_bite(dir)) GTEST_SKIP() << "running with permission to read anything (root)";
  put(dir.file("a/1.jpg"), fake_jpeg(1));
  put(dir.file("b/2.jpg"), fake_jpeg(2));
  const data::ImageFolder f(dir.str());
  ::chmod(dir.file("a/1.jpg").c_str(), 0);
  std::vector<uint8_t> scratch;
  std::string msg = error_of([&] { f.get(0, scratch); }, ErrorCode::io);
  EXPECT_NE(msg.find(dir.file("a/1.jpg") + ": cannot open: Permission denied"), std::string::npos) << msg;
  ::chmod(dir.file("b").c_str(), 0);
  msg = error_of([&] { data::ImageFolder(dir.str()); }, ErrorCode::io);
  EXPECT_NE(msg.find(dir.file("b") + ": cannot list folder: Permission denied"), std::string::npos) << msg;
  ::chmod(dir.file("b").c_str(), 0755);
  ::chmod(dir.file("a/1.jpg").c_str(), 0644);
}

TEST(ImageFolder, ImageExtensions) {
  EXPECT_TRUE(data::has_image_extension("a.JPEG"));
  EXPECT_TRUE(data::has_image_extension("a.b.png"));
  EXPECT_FALSE(data::has_image_extension(".png"));
  EXPECT_FALSE(data::has_image_extension("a.gif"));
  EXPECT_FALSE(data::has_image_extension("apng"));
}
