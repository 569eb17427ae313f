// A streamed POST over a raw socket, for the tests of "stream": true: the request is sent with
// Accept-Encoding: gzip (events must still come as plain text) and Connection: close, and the
// answer is read until the server closes; its chunked body is taken apart into the
// server-sent events' data lines. Also a client that reads up to the first event and hangs up.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/serve_test_util.h"

namespace tandem::testing {

struct SseAnswer {
  int status = 0;
  std::string headers;              // the status line and headers, as sent
  std::vector<std::string> events;  // each event's data, without "data: "
  /// The JSON of every event but [DONE].
  std::vector<nlohmann::json> chunks() const {
    std::vector<nlohmann::json> out;
    for (const std::string& e : events)
      if (e != "[DONE]") out.push_back(nlohmann::json::parse(e));
    return out;
  }
};

/// Sends `request` (a whole HTTP request) on a new connection to `port`.
inline int send_request(int port, const std::string& request) {
  const int fd = connect_to(port);
  EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  return fd;
}

inline std::string completion_request(const std::string& body) {
  return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Accept-Encoding: gzip, deflate\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

/// POST /v1/completions with `body`, read until the server closes the connection.
inline SseAnswer post_stream(int port, const std::string& body) {
  const std::string raw = read_until_closed(send_request(port, completion_request(body)));
  SseAnswer a;
  const size_t end = raw.find("\r\n\r\n");
  EXPECT_NE(end, std::string::npos) << raw;
  if (end == std::string::npos) return a;
  a.headers = raw.substr(0, end);
  a.status = std::stoi(raw.substr(9, 3));
  // Chunked transfer coding: "<hex size>\r\n<bytes>\r\n" ... "0\r\n\r\n".
  std::string body_text;
  size_t at = end + 4;
  while (at < raw.size()) {
    const size_t eol = raw.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(raw.substr(at, eol - at), nullptr, 16);
    if (n == 0) break;
    body_text += raw.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  for (size_t p = 0; p < body_text.size();) {
    const size_t q = body_text.find("\n\n", p);
    EXPECT_NE(q, std::string::npos) << "an event without its blank line: " << body_text.substr(p);
    if (q == std::string::npos) break;
    const std::string event = body_text.substr(p, q - p);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    a.events.push_back(event.substr(6));
    p = q + 2;
  }
  return a;
}

/// POST /v1/completions with `body`, read until the first event arrived, then hang up.
/// Returns what was read.
inline std::string read_first_event_and_hang_up(int port, const std::string& body) {
  const int fd = send_request(port, completion_request(body));
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  const auto has_event = [&] {
    const size_t d = got.find("data: ");
    return d != std::string::npos && got.find("\n\n", d) != std::string::npos;
  };
  ssize_t n;
  while (!has_event() && (n = ::recv(fd, buf, sizeof buf, 0)) > 0)
    got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return got;
}

}  // namespace tandem::testing
