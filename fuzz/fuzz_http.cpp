// Fuzz target: the bytes as one client connection's raw HTTP traffic to an InferenceServer in
// this process (started once on a free loopback port: the mlp of the serving tests on 1x28x28
// inputs, weights published, an online buffer behind /v1/samples, --max-body-mb 1, no token),
// so they take the path a real request takes: DeadlineServer's stream and header bound,
// httplib's request parsing (pipelined requests, chunked and multipart bodies), the routes,
// image decoding and JSON pixels, the batcher and the answers. The write side is closed after
// the bytes, so an incomplete request ends at once.
// Expected: every answer is a complete HTTP response whose status is below 500 or is 503 (the
// queue is full); a 500 (tandem answering bad input as its own fault), a response that does not
// parse, no end of the answer within 30 s, a crash or a sanitizer report is a finding (abort).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "fuzz_target.h"
#include "tandem/data/synthetic_dataset.h"
#include "tandem/nn/models.h"
#include "tandem/serve/server.h"
#include "tandem/train/model_card.h"

namespace {

using namespace tandem;

[[noreturn]] void finding(const std::string& what, const std::string& answer) {
  std::fprintf(stderr, "fuzz_http: %s; answer so far (%zu bytes): %.600s\n", what.c_str(),
               answer.size(), answer.c_str());
  std::abort();
}

serve::InferenceServer& server() {
  static serve::InferenceServer* s = [] {
    static const data::SyntheticDataset set(16, 7);
    train::TrainConfig cfg;
    cfg.model = "mlp";
    train::ModelCard card = train::make_model_card(set, data::DatasetFormat::detect, cfg);
    nn::ModulePtr m = nn::make_model(card.model, card.spec, 2);
    NamedTensors t;
    for (const nn::NamedTensor& n : m->state_dict()) t.emplace_back(n.name, n.tensor.clone());
    auto w = std::make_shared<serve::ServedWeights>();
    w->version = 1;
    w->weights = serve::host_weights(std::move(t));
    serve::ServeOptions o;
    o.listen = "127.0.0.1:0";
    o.max_body_mb = 1;
    o.timeout_s = 2;
    o.request_timeout_s = 5;
    o.http_threads = 2;
    o.max_connections = 8;
    auto online = std::make_shared<serve::OnlineBuffer>(
        16, card.spec.channels * card.spec.height * card.spec.width, card.spec.num_classes, 0);
    // Leaked on purpose: the server's threads run until the process ends.
    auto* srv = new serve::InferenceServer(std::move(card), o, std::move(online), 0.25);
    srv->start();
    srv->publish(std::move(w));
    return srv;
  }();
  return *s;
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) finding(std::string("socket() failed: ") + std::strerror(errno), "");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's -timeout timer (SIGALRM, without SA_RESTART) may interrupt connect(): the
  // connection then completes in the background, and its outcome is the socket's error. (The
  // first hour of this target stopped after 83,657 inputs with "cannot connect", no errno
  // recorded, and the input alone passes: an interrupted connect() is how the harness could
  // fail there.)
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int error = errno;
    if (error == EINTR) {
      pollfd p{fd, POLLOUT, 0};
      while (::poll(&p, 1, 10000) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    }
    if (error != 0) finding(std::string("cannot connect to the server: ") + std::strerror(error), "");
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Sends `data` while reading what comes back (so that neither side blocks on a full buffer),
// closes the write side, then reads until the server closes. Aborts after 30 s.
std::string exchange(int fd, const uint8_t* data, size_t size) {
  std::string answer;
  size_t sent = 0;
  bool write_open = true;
  char buf[1 << 14];
  for (int idle_ms = 0; idle_ms < 30000;) {
    if (write_open && sent == size) {
      ::shutdown(fd, SHUT_WR);
      write_open = false;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (write_open ? POLLOUT : 0)), 0};
    const int r = ::poll(&p, 1, 100);
    if (r == 0) {
      idle_ms += 100;
      continue;
    }
    if (r < 0) continue;
    if (p.revents & POLLIN) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;  // the fuzzer's timer signal
      if (n <= 0) return answer;  // closed (or reset, after the server cut off a bad request)
      answer.append(buf, static_cast<size_t>(n));
    }
    if (write_open && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        write_open = false;  // the server stopped reading: only its answer is left
      else
        sent += static_cast<size_t>(n);
    }
  }
  finding("the server did not finish answering within 30 s", answer);
}

// Checks each response in `answer`: "HTTP/1.1 SSS ...", headers, a Content-Length body.
void check_answers(const std::string& answer) {
  size_t at = 0;
  while (at < answer.size()) {
    const size_t head_end = answer.find("\r\n\r\n", at);
    if (answer.compare(at, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos)
      finding("a response that is not HTTP/1.1", answer.substr(at));
    const std::string head = answer.substr(at, head_end - at);
    const int status = std::atoi(head.c_str() + 9);
    if (status < 100 || (status >= 500 && status != 503))
      finding("status " + std::to_string(status), answer.substr(at));
    at = head_end + 4;
    if (status == 100) continue;  // "Expect: 100-continue" answered: the real answer follows
    const size_t cl = head.find("\r\nContent-Length: ");
    if (cl == std::string::npos) finding("a response without Content-Length", head);
    const size_t length = std::strtoul(head.c_str() + cl + 18, nullptr, 10);
    // A HEAD request's answer has the length of the GET answer and no body: the next answer
    // (or the end) follows the headers at once.
    if (answer.compare(at, 9, "HTTP/1.1 ") == 0 || at == answer.size()) continue;
    if (at + length > answer.size()) finding("a response cut short", head);
    at += length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  serve::InferenceServer& s = server();
  const int fd = connect_to(s.port());
  const std::string answer = exchange(fd, data, size);
  ::close(fd);
  check_answers(answer);
  tandem::fuzz::report(answer.empty() ? "no answer"
                                      : answer.substr(0, answer.find("\r\n")).c_str());
  return 0;
}
