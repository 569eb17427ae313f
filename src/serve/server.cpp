#include "tandem/serve/server.h"

#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "serve/http_connections.h"
#include "serve/routes.h"
#include "tandem/error.h"

namespace tandem::serve {

struct InferenceServer::Http {
  explicit Http(double request_timeout_s) : server(request_timeout_s) {}
  DeadlineServer server;
  std::thread thread;
};

void parse_listen(const std::string& text, const char* flag, std::string& host, int& port) {
  const size_t colon = text.rfind(':');
  TD_CHECK_ARG(colon != std::string::npos && colon > 0 && colon + 1 < text.size(), "serve",
               "{} {}: expected HOST:PORT, e.g. 127.0.0.1:8080", flag, text);
  host = text.substr(0, colon);
  const char* b = text.data() + colon + 1;
  const char* e = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(b, e, port);
  TD_CHECK_ARG(ec == std::errc() && ptr == e && port >= 0 && port <= 65535, "serve",
               "{} {}: expected a port in 0..65535 after the colon", flag, text);
}

static std::string read_token(const std::string& path) {
  std::ifstream in(path);
  TD_CHECK(in.good(), ErrorCode::io, "serve", "--serve-token {}: cannot read the file", path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  TD_CHECK(!token.empty(), ErrorCode::io, "serve", "--serve-token {}: expected the token on the first line, got an empty line",
           path);
  return token;
}

InferenceServer::InferenceServer(train::ModelCard card, ServeOptions options, std::shared_ptr<OnlineBuffer> online,
                                 double online_mix)
    : card_(std::move(card)), opt_(std::move(options)), online_(std::move(online)), online_mix_(online_mix) {
  parse_listen(opt_.listen, "--listen", host_, port_);
  TD_CHECK_ARG(opt_.max_body_mb > 0 && opt_.max_body_mb <= 4096, "serve", "--max-body-mb: expected (0, 4096], got {}",
               opt_.max_body_mb);
  // Under 10 ms every read (or every request) would time out before its bytes arrive.
  TD_CHECK_ARG(opt_.timeout_s >= 0.01 && opt_.timeout_s <= 3600, "serve",
               "--timeout-s: expected seconds in [0.01, 3600], got {}", opt_.timeout_s);
  TD_CHECK_ARG(opt_.http_threads >= 1 && opt_.http_threads <= 1024, "serve", "--http-threads: expected 1..1024, got {}",
               opt_.http_threads);
  TD_CHECK_ARG(opt_.request_timeout_s >= 0.01 && opt_.request_timeout_s <= 3600, "serve",
               "--request-timeout-s: expected seconds in [0.01, 3600], got {}", opt_.request_timeout_s);
  TD_CHECK_ARG(opt_.max_connections >= opt_.http_threads && opt_.max_connections <= 65536, "serve",
               "--max-connections: expected --http-threads ({}) .. 65536, got {}", opt_.http_threads,
               opt_.max_connections);
  TD_CHECK_ARG(opt_.top_k >= 1, "serve", "--top-k: expected at least 1, got {}", opt_.top_k);
  if (!opt_.token_file.empty()) token_ = read_token(opt_.token_file);
  if (online_) metrics_.set_online(online_->size(), online_->capacity(), online_mix_);
  TD_CHECK_ARG(opt_.max_completion_tokens >= 1, "serve",
               "--max-completion-tokens: expected at least 1, got {}", opt_.max_completion_tokens);
  TD_CHECK_ARG(!card_.language_model() || !online_, "serve",
               "a language model takes no samples (/v1/samples is for image classifiers)");
  if (card_.language_model())
    completer_ = std::make_unique<Completer>(card_, opt_.batcher, &metrics_);
  else
    batcher_ = std::make_unique<DynamicBatcher>(card_, opt_.batcher, &metrics_);
}

InferenceServer::~InferenceServer() { stop(); }

bool InferenceServer::authorized(const std::string& header) const {
  if (token_.empty()) return true;
  const std::string want = "Bearer " + token_;
  if (header.size() != want.size()) return false;
  unsigned diff = 0;  // constant time in the token's length
  for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned>(header[i] ^ want[i]);
  return diff == 0;
}

void InferenceServer::publish(std::shared_ptr<const ServedWeights> w) { slot_.publish(std::move(w)); }

void InferenceServer::start() {
  TD_CHECK(!http_, ErrorCode::internal, "serve", "start() called twice");
  auto http = std::make_unique<Http>(opt_.request_timeout_s);
  httplib::Server& s = http->server;
  s.new_task_queue = [warm = opt_.http_threads, max = opt_.max_connections] { return new_connection_pool(warm, max); };
  const auto timeout = std::chrono::microseconds(static_cast<int64_t>(opt_.timeout_s * 1e6));
  s.set_read_timeout(timeout);
  s.set_write_timeout(timeout);
  s.set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, opt_.timeout_s)));
  s.set_tcp_nodelay(true);  // small answers: no Nagle delay waiting for an ACK
  // httplib's default options set SO_REUSEPORT, with which a second server on a busy address
  // starts too and takes part of its connections. SO_REUSEADDR alone only allows rebinding
  // while old connections linger in TIME_WAIT.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_payload_max_length(static_cast<size_t>(opt_.max_body_mb * 1024 * 1024));
  add_routes(s, *this);
  const int bound = port_ == 0 ? s.bind_to_any_port(host_) : (s.bind_to_port(host_, port_) ? port_ : -1);
  TD_CHECK(bound > 0, ErrorCode::io, "serve", "cannot listen on {}:{}: the address is in use or not local", host_,
           port_);
  port_ = bound;
  // Wait until the accept loop runs: a stop() before it starts (an error right after start(),
  // e.g. an unwritable --port-file) would otherwise leave the loop running on a closed socket
  // and the join in stop() waiting for ever.
  auto ended = std::make_shared<std::atomic<bool>>(false);
  http->thread = std::thread([srv = &http->server, ended] {
    srv->listen_after_bind();
    ended->store(true);
  });
  while (!s.is_running() && !ended->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_ = std::move(http);
}

void InferenceServer::stop() {
  if (!http_) return;
  http_->server.stop();
  if (http_->thread.joinable()) http_->thread.join();
  http_.reset();
}

}  // namespace tandem::serve
