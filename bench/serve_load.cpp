// serve_load: a closed-loop HTTP load client for `tandem serve` and `tandem train --serve`.
// C clients (threads, one keep-alive connection each) POST PNG images of 28x28 synthetic
// Fashion-MNIST-like samples to /v1/predict, each waiting for its answer before the next
// request. Prints requests/s, latency p50/p99/max (client side, ms), failures, the versions
// answered (distinct, first, last) and answers whose version went back for their client.
// usage: serve_load PORT [requests 10000] [clients 8] [--until-gone] [--token TOKEN]
//   --until-gone: after `requests`, keep going until the server stops answering (a training
//   run that ended), so that the whole run is under load; figures cover every request.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tandem/data/image_codec.h"
#include "tandem/data/synthetic_dataset.h"

namespace {

using Clock = std::chrono::steady_clock;

struct ClientTally {
  std::vector<double> latency_ms;
  std::set<int64_t> versions;
  int64_t failures = 0, backwards = 0, first = -1, last = -1, gone = 0;
};

std::vector<std::string> make_pngs(int n) {
  tandem::data::SyntheticDataset set(n, 11);
  std::vector<std::string> out;
  std::vector<uint8_t> scratch, rgb(28 * 28 * 3);
  for (int i = 0; i < n; ++i) {
    const tandem::data::Sample s = set.get(i, scratch);
    for (int k = 0; k < 784; ++k) rgb[static_cast<size_t>(k) * 3] = rgb[k * 3 + 1] = rgb[k * 3 + 2] = s.pixels[k];
    const std::vector<uint8_t> png = tandem::data::encode_png(rgb.data(), 28, 28);
    out.emplace_back(png.begin(), png.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: serve_load PORT [requests] [clients] [--until-gone] [--token TOKEN]\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  int64_t requests = 10000;
  int clients = 8;
  bool until_gone = false;
  std::string token;
  int positional = 0;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--until-gone")) until_gone = true;
    else if (!std::strcmp(argv[i], "--token") && i + 1 < argc) token = argv[++i];
    else if (positional++ == 0) requests = std::atoll(argv[i]);
    else clients = std::atoi(argv[i]);
  }
  const std::vector<std::string> pngs = make_pngs(64);
  std::atomic<int64_t> issued{0};
  std::vector<ClientTally> tally(static_cast<size_t>(clients));
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      ClientTally& t = tally[static_cast<size_t>(c)];
      httplib::Client cli("127.0.0.1", port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      cli.set_read_timeout(std::chrono::seconds(30));
      if (!token.empty()) cli.set_bearer_token_auth(token);
      for (int64_t k = c;; k += clients) {
        const int64_t n = issued++;
        if (n >= requests && !until_gone) break;
        const auto s = Clock::now();
        auto r = cli.Post("/v1/predict", pngs[static_cast<size_t>(k % 64)], "image/png");
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - s).count();
        if (!r) {
          if (n >= requests) break;  // --until-gone: the server went away after enough requests
          ++t.failures;
          if (++t.gone > 20) break;  // the server is gone before the requests were done
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
        if (r->status != 200) {
          ++t.failures;
          continue;
        }
        const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
        if (j.is_discarded() || !j.contains("version")) {
          ++t.failures;
          continue;
        }
        const int64_t v = j["version"];
        if (v < t.last) ++t.backwards;
        if (t.first < 0) t.first = v;
        t.last = v;
        t.versions.insert(v);
        t.latency_ms.push_back(ms);
      }
    });
  }
  for (auto& th : threads) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  std::set<int64_t> versions;
  int64_t failures = 0, backwards = 0, first = -1, last = -1;
  for (const ClientTally& t : tally) {
    all.insert(all.end(), t.latency_ms.begin(), t.latency_ms.end());
    versions.insert(t.versions.begin(), t.versions.end());
    failures += t.failures;
    backwards += t.backwards;
    if (t.first >= 0 && (first < 0 || t.first < first)) first = t.first;
    last = std::max(last, t.last);
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(q * static_cast<double>(all.size())))];
  };
  std::printf("serve_load requests %zu clients %d seconds %.2f req_per_s %.0f p50_ms %.2f p99_ms %.2f max_ms %.2f "
              "failures %lld versions %zu first_version %lld last_version %lld backwards %lld\n",
              all.size(), clients, seconds, static_cast<double>(all.size()) / seconds, pct(0.50), pct(0.99),
              all.empty() ? 0.0 : all.back(), static_cast<long long>(failures), versions.size(),
              static_cast<long long>(first), static_cast<long long>(last), static_cast<long long>(backwards));
  return failures == 0 && backwards == 0 && !all.empty() ? 0 : 1;
}
