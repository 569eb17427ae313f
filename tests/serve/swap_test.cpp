// Weight swaps under load: client threads hammer /v1/predict while versions are published;
// no request fails, each client sees versions that never go back, and every answer holds
// exactly the probabilities of the version it names (a request is answered by the weights it
// was admitted with, never a mix).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "serve/serve_test_util.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

TEST(ServeSwap, TwentyFiveSwapsUnderEightClientsLoseNoRequest) {
  const train::ModelCard card = synthetic_card("mlp");
  serve::ServeOptions o;
  o.batcher.max_batch = 8;
  o.batcher.max_delay_ms = 1;
  auto server = start_server(card, o);
  constexpr int kVersions = 25, kClients = 8;
  const std::vector<uint8_t> px = sample_pixels(11);
  const std::string png = gray_png(px, 28, 28);
  // The expected top-1 probability of each version (seed = version).
  std::vector<std::shared_ptr<serve::ServedWeights>> versions;
  std::map<int64_t, std::vector<double>> expected;
  for (int v = 1; v <= kVersions; ++v) {
    versions.push_back(seeded_weights(card, static_cast<uint64_t>(v), v));
    expected[v] = reference_probs(card, *versions.back(), px);
  }
  server->publish(versions[0]);
  std::atomic<bool> done{false};
  std::atomic<int64_t> failures{0}, answers{0}, wrong{0}, backwards{0};
  std::vector<std::set<int64_t>> seen(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto cli = client_of(*server);
      int64_t last = 0;
      int64_t after_done = 0;
      while (after_done < 3) {  // a few requests more once the last version is published
        if (done) ++after_done;
        auto r = cli->Post("/v1/predict?top_k=10", png, "image/png");
        if (!r || r->status != 200) {
          ++failures;
          continue;
        }
        const json j = json::parse(r->body);
        const int64_t v = j["version"];
        if (v < last) ++backwards;
        last = v;
        seen[static_cast<size_t>(c)].insert(v);
        ++answers;
        const std::vector<double>& e = expected.at(v);
        for (const json& t : j["predictions"][0]["top_k"])
          if (std::abs(t["probability"].get<double>() - e[t["class"].get<size_t>()]) > 2e-6) ++wrong;
      }
    });
  }
  for (int v = 2; v <= kVersions; ++v) {
    // Publish once some answers came from the previous version.
    const int64_t before = answers.load();
    while (answers.load() < before + kClients) std::this_thread::yield();
    server->publish(versions[static_cast<size_t>(v - 1)]);
  }
  done = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(backwards.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(server->metrics().requests("/v1/predict"), answers.load() + failures.load());
  std::set<int64_t> all;
  for (const auto& s : seen) all.insert(s.begin(), s.end());
  EXPECT_GE(all.size(), static_cast<size_t>(kVersions / 2)) << "versions answered";
  EXPECT_TRUE(all.count(kVersions)) << "the last version answered";
  EXPECT_EQ(server->weights().publishes(), kVersions);
}

}  // namespace
}  // namespace tandem::testing
