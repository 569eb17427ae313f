// Internal: how the inference service holds its HTTP connections (cpp-httplib 0.11).
//  - DeadlineServer: an httplib::Server whose connections read each request (request line,
//    headers and body) under a total deadline, `request_timeout_s` from its first byte, on
//    top of httplib's per-read timeout (set_read_timeout). A client that trickles bytes just
//    fast enough for every single read (slowloris) is cut off at the deadline: httplib
//    answers the half-read request with its error status (400) and the connection is closed.
//    The request line and headers together may have at most kMaxHeaderBytes (httplib 0.11
//    bounds each line, 8 KiB, not their number): a client sending more is cut off (400).
//    The body may take at most the payload limit (set_payload_max_length) and a quarter more
//    on the wire: httplib checks a Content-Length but reads chunked bodies of any size.
//    Idle keep-alive connections are closed after set_keep_alive_timeout, at most
//    set_keep_alive_max_count requests each; idle ones and ones still sending are let go
//    within 0.1 s when the server stops.
//    It runs httplib's own request processing (Server::process_request) on a stream of its
//    own (DeadlineStream) in place of httplib's socket stream: the extension point httplib's
//    SSLServer uses.
//  - new_connection_pool(warm, max): the server's task queue: one thread per connection being
//    served, `warm` of them kept, more started on demand up to `max` (extra ones end after
//    being idle a few seconds); connections beyond `max` wait for a thread. Slow clients thus
//    hold threads of their own and never the one answering /healthz, as long as fewer than
//    `max` connections are open.
// Thread-safety: as httplib::Server (configure, then listen on one thread; stop() from any).
#pragma once

#include <httplib.h>

namespace tandem::serve {

/// Most bytes of a request's line and headers, "\r\n\r\n" included (nginx allows 32 KiB).
inline constexpr size_t kMaxHeaderBytes = size_t{64} << 10;

class DeadlineServer final : public httplib::Server {
 public:
  /// `request_timeout_s` > 0: the longest a request may take to arrive, seconds.
  explicit DeadlineServer(double request_timeout_s) : request_timeout_s_(request_timeout_s) {}

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Whether a request starts within the keep-alive timeout (false: idle, gone, or stopping).
  bool wait_for_request(socket_t sock, bool buffered) const;

  double request_timeout_s_;
};

/// A TaskQueue of `warm` (>= 1) kept threads and up to `max` (>= warm) in all; the caller
/// owns it (httplib's new_task_queue hands it to the server, which deletes it).
httplib::TaskQueue* new_connection_pool(int warm, int max);

}  // namespace tandem::serve
