// `tandem tokenize --corpus FILE... --out DIR`: trains a SentencePiece tokenizer on a text corpus
// and writes the train and validation token shards (include/tandem/data/tokenizer.h).
#include <fmt/format.h>

#include "commands.h"
#include "tandem/data/tokenizer.h"

namespace tandem::tools {

namespace {
data::TokenizeOptions& options() {
  static data::TokenizeOptions o;
  return o;
}
}  // namespace

void add_tokenize_command(CLI::App& app) {
  data::TokenizeOptions& o = options();
  CLI::App* c = app.add_subcommand("tokenize",
                                   "Train a SentencePiece tokenizer on UTF-8 text and write "
                                   "train/val token shards for --model gpt*");
  c->add_option("--corpus", o.corpus, "Text files (UTF-8), read in order")
      ->required()
      ->expected(1, -1);
  c->add_option("--out", o.out_dir, "Output folder: tokenizer.model, train.tok, val.tok (created)")
      ->required();
  c->add_option("--vocab-size", o.vocab_size, "Tokens in the vocabulary, special ids included")
      ->capture_default_str();
  c->add_option("--val-fraction", o.val_fraction,
                "Share of the corpus (its end) held out for validation")
      ->capture_default_str();
  c->add_option("--model-type", o.model_type, "SentencePiece model: bpe or unigram")
      ->capture_default_str();
  c->add_option("--threads", o.num_threads, "SentencePiece training threads")
      ->capture_default_str();
  strict_values(c);
}

int run_tokenize_command() {
  const data::TokenizeResult r = data::tokenize_corpus(options());
  fmt::print(
      "tokenized {:.2f} MB of text in {:.1f} s: vocab {}, {} train tokens ({}), {} val tokens "
      "({}); "
      "tokenizer {}\n",
      r.corpus_bytes / 1e6, r.seconds, r.vocab_size, r.train_tokens, r.train_path, r.val_tokens,
      r.val_path, r.model_path);
  return 0;
}

}  // namespace tandem::tools
