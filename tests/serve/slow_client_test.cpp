// Slow clients (slowloris): connections that trickle a header line at a time, each read well
// within --timeout-s, neither hold up other clients (each connection has a thread of its own,
// more than --http-threads when needed) nor stay open past --request-timeout-s: the server
// closes them. The time bounds here are guards against a hang, far above what the server needs.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "serve/serve_test_util.h"

namespace tandem::testing {
namespace {

// Sends `chunk` again and again until `total` bytes went or the server stopped taking them
// (it closed the connection); the bytes sent.
size_t send_repeated(int fd, const std::string& chunk, size_t total) {
  size_t sent = 0;
  while (sent < total) {
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  return sent;
}

struct SlowClient {
  int fd = -1;
  std::atomic<bool> closed{false};  // by the server: recv() saw the end, or send() failed
  int lines = 0;
  std::string answer;
};

// One round over the open clients: take what the server sent (noting a close), else send
// one more header line.
void trickle(std::vector<SlowClient>& clients) {
  for (SlowClient& c : clients) {
    if (c.closed) continue;
    pollfd p{c.fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      char buf[4096];
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.answer.append(buf, static_cast<size_t>(n));
      } else {
        c.closed = true;
      }
      continue;
    }
    const std::string line = c.lines == 0 ? "POST /v1/predict HTTP/1.1\r\nHost: x\r\n"
                                          : "X-Slow-" + std::to_string(c.lines) + ": 1\r\n";
    if (::send(c.fd, line.data(), line.size(), MSG_NOSIGNAL) < 0) c.closed = true;
    ++c.lines;
  }
}

TEST(ServeSlowClients, TricklingConnectionsNeitherStarveHealthzNorOutliveTheRequestDeadline) {
  const train::ModelCard card = synthetic_card("mlp");
  serve::ServeOptions o;
  o.http_threads = 2;
  o.max_connections = 64;
  o.timeout_s = 2;          // each read: a line comes every 0.1 s, so this never fires
  o.request_timeout_s = 4;  // the whole request: the trickling ones are cut off here
  auto server = start_server(card, o);
  server->publish(seeded_weights(card, 2, 1));

  constexpr int kSlow = 6;  // three times the kept threads
  std::vector<SlowClient> clients(kSlow);
  for (SlowClient& c : clients) c.fd = connect_to(server->port());
  std::atomic<bool> started{false}, done{false};
  std::thread trickler([&] {
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < guard) {
      trickle(clients);
      if (std::all_of(clients.begin(), clients.end(), [](const SlowClient& c) { return c.lines >= 3; }))
        started = true;
      if (std::all_of(clients.begin(), clients.end(), [](const SlowClient& c) { return c.closed.load(); })) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    done = true;
  });
  while (!started && !done) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  // Answered while every slow connection is still open and sending.
  auto cli = client_of(*server);
  cli->set_read_timeout(std::chrono::seconds(30));
  auto r = cli->Get("/healthz");
  std::vector<bool> closed_then;
  for (const SlowClient& c : clients) closed_then.push_back(c.closed.load());
  trickler.join();
  EXPECT_TRUE(r) << "/healthz unanswered while " << kSlow << " slow clients were connected";
  EXPECT_EQ(r ? r->status : -1, 200);
  EXPECT_EQ(std::count(closed_then.begin(), closed_then.end(), true), 0)
      << "/healthz was answered only after slow connections were cut off";
  for (const SlowClient& c : clients) {
    EXPECT_TRUE(c.closed) << "a connection still trickling after " << c.lines << " lines was left open";
    if (!c.answer.empty()) {  // httplib answers a half-read request with 400, as one line of JSON
      EXPECT_EQ(c.answer.rfind("HTTP/1.1 400", 0), 0u) << c.answer;
      EXPECT_NE(c.answer.find("{\"error\":"), std::string::npos) << c.answer;
    }
    ::close(c.fd);
  }
  r = cli->Post("/v1/predict", gray_png(sample_pixels(1), 28, 28), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// Stopping the server lets go of a client still sending, long before any timeout would.
TEST(ServeSlowClients, StopLetsGoOfAClientStillSending) {
  const train::ModelCard card = synthetic_card("mlp");
  serve::ServeOptions o;
  o.timeout_s = 600;
  o.request_timeout_s = 600;
  auto server = start_server(card, o);
  const int fd = connect_to(server->port());
  const std::string part = "POST /v1/predict HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n";
  ASSERT_EQ(::send(fd, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
  auto cli = client_of(*server);
  ASSERT_TRUE(cli->Get("/healthz"));  // the connection above is being read by now
  auto stopped = std::async(std::launch::async, [&] { server->stop(); });
  const bool in_time = stopped.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  EXPECT_TRUE(in_time) << "stop() still waits for the half-sent request";
  timeval tv{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  EXPECT_EQ(n, 0) << "the server closed the connection (not our 60 s guard)";
  ::close(fd);  // lets a stop() that waited for it finish
  stopped.wait();
}

// Headers sent as fast as the socket takes them (no single read stalls, the request deadline
// is far off): httplib 0.11 bounds each header line but not their number, so the server would
// keep every one in memory (a gigabyte in a few seconds on loopback). It stops reading after
// kMaxHeaderBytes and closes the connection, and keeps serving.
TEST(ServeSlowClients, EndlessHeadersAreCutOffAtTheHeaderLimit) {
  const train::ModelCard card = synthetic_card("mlp");
  serve::ServeOptions o;
  o.timeout_s = 60;
  o.request_timeout_s = 600;
  auto server = start_server(card, o);
  server->publish(seeded_weights(card, 2, 1));
  const int fd = connect_to(server->port());
  std::string chunk = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  ASSERT_EQ(::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL), static_cast<ssize_t>(chunk.size()));
  chunk.clear();
  for (int i = 0; i < 32; ++i) chunk += "X-Flood-" + std::to_string(i) + ": " + std::string(2000, 'a') + "\r\n";
  constexpr size_t kTotal = size_t{256} << 20;  // far above the limit and any socket buffers
  const size_t sent = send_repeated(fd, chunk, kTotal);
  EXPECT_LT(sent, kTotal) << "the server read " << (sent >> 20) << " MiB of headers of one request";
  ::close(fd);
  auto cli = client_of(*server);
  auto r = cli->Post("/v1/predict", gray_png(sample_pixels(1), 28, 28), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // A request with many ordinary headers under the limit is still answered.
  httplib::Headers many;
  for (int i = 0; i < 100; ++i) many.emplace("X-Ok-" + std::to_string(i), std::string(100, 'b'));
  r = cli->Get("/healthz", many);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// A chunked body (no Content-Length for httplib to check against --max-body-mb) is bounded
// all the same: httplib 0.11 reads chunked bodies of any size into memory, on every route.
TEST(ServeSlowClients, ChunkedBodiesAreBoundedByMaxBodyMb) {
  const train::ModelCard card = synthetic_card("mlp");
  serve::ServeOptions o;
  o.max_body_mb = 1;
  o.timeout_s = 60;
  o.request_timeout_s = 600;
  auto server = start_server(card, o);
  server->publish(seeded_weights(card, 2, 1));
  for (const std::string path : {"/v1/predict", "/v1/nope"}) {
    SCOPED_TRACE(path);
    const int fd = connect_to(server->port());
    const std::string head =
        "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n";
    ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    const std::string chunk = "10000\r\n" + std::string(0x10000, 'a') + "\r\n";
    constexpr size_t kTotal = size_t{256} << 20;
    const size_t sent = send_repeated(fd, chunk, kTotal);
    EXPECT_LT(sent, kTotal) << "the server read a chunked body of " << (sent >> 20) << " MiB";
    ::close(fd);
  }
  auto cli = client_of(*server);
  auto r = cli->Post("/v1/predict", gray_png(sample_pixels(1), 28, 28), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(ServeSlowClients, ConnectionLimitsAreChecked) {
  const train::ModelCard card = synthetic_card("mlp");
  serve::ServeOptions o;
  o.http_threads = 8;
  o.max_connections = 4;
  EXPECT_THROW(serve::InferenceServer(card, o), Error);
  o.max_connections = 8;
  o.request_timeout_s = 0;
  EXPECT_THROW(serve::InferenceServer(card, o), Error);
  // Under 10 ms no request can arrive (each read, or the whole request, times out at once):
  // a server that answers nothing is refused at start-up.
  o.request_timeout_s = 1e-7;
  EXPECT_THROW(serve::InferenceServer(card, o), Error);
  o.request_timeout_s = 30;
  o.timeout_s = 1e-7;
  EXPECT_THROW(serve::InferenceServer(card, o), Error);
  o.timeout_s = 0.01;
  o.request_timeout_s = 0.01;
  EXPECT_NO_THROW(serve::InferenceServer(card, o));
}

// A second server on the address of a running one is refused (cpp-httplib's default socket
// options set SO_REUSEPORT, which let both listen and share the connections).
TEST(ServeListen, ASecondServerOnABusyAddressIsRefused) {
  const train::ModelCard card = synthetic_card("mlp");
  std::unique_ptr<serve::InferenceServer> first = start_server(card);
  serve::ServeOptions o;
  o.listen = "127.0.0.1:" + std::to_string(first->port());
  serve::InferenceServer second(card, o, nullptr, 0);
  try {
    second.start();
    ADD_FAILURE() << "a second server started on " << o.listen;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on " + o.listen), std::string::npos) << e.what();
  }
  first->stop();
}

}  // namespace
}  // namespace tandem::testing
