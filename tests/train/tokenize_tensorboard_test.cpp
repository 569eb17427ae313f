// The tokenizer and TensorBoard event files in one process. SentencePiece (Debian's
// libsentencepiece) carries its own copy of protobuf's symbols; tandem_metrics writes event
// files with libprotobuf-lite. When both were linked into one program the event writing
// crashed. This test tokenizes a corpus, trains gpt-mini on the shards for one epoch, writes
// the run's losses as TensorBoard scalars and reads every record back, all in this process,
// then encodes and decodes again after the event file was written.
// Figures asserted: the event file's records framed with masked CRC32Cs, the Event messages
// parsed back by libprotobuf-lite holding the epoch's train and test loss at step 1 (finite,
// and the test loss below ln 300 + 1 = 6.70 nats, an untrained model's value plus a margin),
// and the text round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "data/asan_skip.h"
#include "data/temp_dir.h"
#include "data/text_corpus.h"
#include "tandem/data/tokenizer.h"
#include "tandem/metrics/tensorboard.h"
#include "tandem/train/config.h"
#include "tandem/train/trainer.h"
#include "tensorboard_event.pb.h"

namespace tandem {
namespace {

using testing::TempDir;

std::string corpus(int lines) { return testing::word_corpus(lines, 99); }

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

TEST(TokenizeAndTensorBoard, OneProcessTokenizesTrainsAndWritesEvents) {
  SKIP_UNDER_SANITIZER();
  TempDir dir;
  {
    std::ofstream f(dir.file("corpus.txt"));
    f << corpus(900);
  }
  data::TokenizeOptions o;
  o.corpus = {dir.file("corpus.txt")};
  o.out_dir = dir.file("tok");
  o.vocab_size = 300;
  const data::TokenizeResult tr = data::tokenize_corpus(o);
  ASSERT_EQ(tr.vocab_size, 300);

  train::TrainConfig cfg;
  cfg.model = "gpt-mini";
  cfg.data_dir = o.out_dir;
  cfg.epochs = 1;
  cfg.batch_size = 4;
  cfg.eval_batch_size = 4;
  cfg.lr = 1e-3;
  cfg.optimizer = "adamw";
  cfg.num_workers = 0;
  std::string event_path;
  {
    metrics::TensorBoardWriter tb(dir.file("tb"));
    event_path = tb.path();
    train::Trainer trainer(cfg);
    train::TrainCallbacks cb;
    cb.on_epoch_end = [&](const train::EpochStats& e) {
      tb.add_scalars(e.epoch, {{"train/loss", e.train_loss}, {"test/loss", e.test_loss}});
    };
    trainer.fit(cb);
  }

  const std::vector<uint8_t> bytes = read_all(event_path);
  size_t pos = 0;
  int records = 0;
  double train_loss = NAN, test_loss = NAN;
  int64_t step = -1;
  while (pos < bytes.size()) {
    ASSERT_LE(pos + 12, bytes.size());
    const uint64_t len = le(&bytes[pos], 8);
    EXPECT_EQ(le(&bytes[pos + 8], 4), metrics::masked_crc32c(&bytes[pos], 8));
    ASSERT_LE(pos + 12 + len + 4, bytes.size());
    EXPECT_EQ(le(&bytes[pos + 12 + len], 4), metrics::masked_crc32c(&bytes[pos + 12], len));
    metrics::tb::Event ev;
    ASSERT_TRUE(ev.ParseFromArray(&bytes[pos + 12], static_cast<int>(len)));
    if (records == 0) {
      EXPECT_EQ(ev.file_version(), "brain.Event:2");
    }
    for (const auto& v : ev.summary().value()) {
      step = ev.step();
      if (v.tag() == "train/loss") train_loss = v.simple_value();
      if (v.tag() == "test/loss") test_loss = v.simple_value();
    }
    pos += 12 + len + 4;
    ++records;
  }
  EXPECT_EQ(records, 2);
  EXPECT_EQ(step, 1);
  EXPECT_TRUE(std::isfinite(train_loss));
  EXPECT_TRUE(std::isfinite(test_loss));
  EXPECT_LT(test_loss, std::log(300.0) + 1.0);

  // The tokenizer still works after protobuf-lite serialised the events.
  const data::Tokenizer tok(tr.model_path);
  const std::string line = "the lazy cat sat upon the mat.";
  EXPECT_EQ(tok.decode(tok.encode(line)), line);
}

}  // namespace
}  // namespace tandem
