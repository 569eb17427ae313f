#include "serve/routes.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "serve/answers.h"
#include "serve/completion_stream.h"
#include "serve/completions.h"
#include "tandem/serve/http_error.h"
#include "tandem/serve/request_images.h"

namespace tandem::serve {

namespace {

using nlohmann::json;

struct Endpoint {
  const char* path;
  const char* method;
};
constexpr Endpoint kEndpoints[] = {{"/v1/predict", "POST"}, {"/v1/completions", "POST"},
                                   {"/v1/samples", "POST"}, {"/v1/model", "GET"},
                                   {"/healthz", "GET"},     {"/readyz", "GET"},
                                   {"/metrics", "GET"}};

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_json(status, message), "application/json");
}

int64_t int_param(const httplib::Request& req, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  int64_t x = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || ptr != v.data() + v.size() || x < lo || x > hi)
    throw HttpError(400, fmt::format("?{}={}: expected an integer in [{}, {}]", name, v.substr(0, 32), lo, hi));
  return x;
}

// Nesting deeper than any request needs ({"samples": [{"pixels": [C, H, W]}]} is 6 levels) is
// refused while parsing: a body of a million '[' would otherwise build a million-level tree
// that dumping or walking it recursively overflows the handler's stack with.
constexpr int kMaxJsonDepth = 8;

json parse_json(const std::string& body) {
  const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth)
      throw HttpError(400, fmt::format("the JSON body nests deeper than {} levels: expected [N, C, H, W] pixel "
                                       "arrays or sample records",
                                       kMaxJsonDepth));
    return true;
  };
  try {
    return json::parse(body, limit_depth);
  } catch (const json::exception& e) {
    throw HttpError(400, fmt::format("the body is not valid JSON: {}", e.what()));
  }
}

bool is_json(const httplib::Request& req) {
  return req.get_header_value("Content-Type").rfind("application/json", 0) == 0;
}

// The body of a request read through httplib's ContentReader: the parts of a multipart body
// in the order they came (httplib's parsed req.files is a map that sorts them by name), else
// the whole body. At most kMaxRequestParts parts are kept; the rest is read and dropped so the
// connection stays in step, then refused.
struct PredictBody {
  std::vector<std::string> parts;
  std::string body;
};

PredictBody read_predict_body(const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader& reader, double max_body_mb) {
  PredictBody b;
  int64_t count = 0;
  const bool ok = req.is_multipart_form_data()
                      ? reader(
                            [&](const httplib::MultipartFormData&) {
                              if (++count <= kMaxRequestParts) b.parts.emplace_back();
                              return true;
                            },
                            [&](const char* data, size_t n) {
                              if (count <= kMaxRequestParts) b.parts.back().append(data, n);
                              return true;
                            })
                      : reader([&](const char* data, size_t n) {
                          b.body.append(data, n);
                          return true;
                        });
  if (!ok && res.status == 413) throw HttpError(413, fmt::format("the request body is over --max-body-mb {} MiB", max_body_mb));
  if (!ok)
    throw HttpError(400, req.is_multipart_form_data()
                             ? "malformed or incomplete multipart body: expected parts separated by the boundary "
                               "its Content-Type names"
                             : "malformed or incomplete request body");
  if (count > kMaxRequestParts)
    throw HttpError(400, fmt::format("multipart body of {} parts: expected at most {} images per request", count,
                                     kMaxRequestParts));
  return b;
}

// The images of a /v1/predict request (see server.h).
std::vector<RawImage> predict_images(const httplib::Request& req, const PredictBody& b, const InputRules& rules) {
  std::vector<RawImage> images;
  const auto name = [&] { return fmt::format("image {}", images.size()); };
  if (req.is_multipart_form_data()) {
    for (const std::string& part : b.parts)
      images.push_back(image_from_bytes(reinterpret_cast<const uint8_t*>(part.data()), part.size(), rules, name()));
    if (images.empty()) throw HttpError(400, "multipart body without parts: expected one image per part");
    return images;
  }
  const std::string& body = b.body;
  if (body.empty()) throw HttpError(400, "empty body: expected PNG or JPEG bytes or a JSON array of pixels");
  if (!is_json(req))
    return {image_from_bytes(reinterpret_cast<const uint8_t*>(body.data()), body.size(), rules, "image 0")};
  const json j = parse_json(body);
  if (!json_holds_several(j, rules)) return {image_from_json(j, rules, "image 0")};
  for (const json& one : j) images.push_back(image_from_json(one, rules, name()));
  return images;
}

// The labelled samples of a /v1/samples request, all validated.
void sample_records(const httplib::Request& req, const InputRules& rules, std::vector<RawImage>& images,
                    std::vector<int64_t>& labels) {
  const int64_t classes = rules.card->spec.num_classes;
  if (!is_json(req)) {
    if (!req.has_param("label")) throw HttpError(400, "image bytes need ?label=L, or send JSON records");
    labels.push_back(int_param(req, "label", 0, 0, classes - 1));
    images.push_back(image_from_bytes(reinterpret_cast<const uint8_t*>(req.body.data()), req.body.size(), rules,
                                      "sample 0"));
    return;
  }
  json j = parse_json(req.body);
  if (j.is_object() && j.contains("samples")) j = j["samples"];
  if (j.is_object()) j = json::array({j});
  if (!j.is_array() || j.empty())
    throw HttpError(400, "expected a JSON list of {\"label\": L, \"pixels\": [C, H, W]} records");
  for (size_t i = 0; i < j.size(); ++i) {
    const json& r = j[i];
    const std::string what = fmt::format("sample {}", i);
    if (!r.is_object() || !r.contains("label") || !r.contains("pixels"))
      throw HttpError(400, fmt::format("{}: expected an object with \"label\" and \"pixels\"", what));
    const json& l = r["label"];
    if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= classes)
      throw HttpError(400, fmt::format("{}: label {} is not an integer in [0, {})", what, l.dump().substr(0, 32), classes));
    labels.push_back(l.get<int64_t>());
    images.push_back(image_from_json(r["pixels"], rules, what));
  }
}

// Runs `fn` and turns what it throws into a JSON error; times and counts the request.
void answer(InferenceServer& server, const char* path, bool needs_token, const httplib::Request& req,
            httplib::Response& res, const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (needs_token && !server.authorized(req.get_header_value("Authorization")))
      throw HttpError(401, req.has_header("Authorization") ? "wrong bearer token"
                                                            : "missing bearer token: send Authorization: Bearer TOKEN");
    fn();
  } catch (const std::exception& e) {
    send_error(res, http_status_of(e), e.what());
  }
  server.metrics().count_request(path);
  if (std::string_view(path) == "/v1/predict" && res.status < 400)
    server.metrics().observe_latency(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

void add_routes(httplib::Server& http, InferenceServer& server) {
  InferenceServer* s = &server;
  // A compressed body (Content-Encoding: gzip, deflate, br) would be inflated by the HTTP library
  // before any route sees it, past --max-body-mb (2 MB of gzip inflate to 2 GiB): refused unread,
  // and the connection closed (its body is not read).
  http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    const std::string enc = req.get_header_value("Content-Encoding");
    if (enc.empty() || enc == "identity") return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 415,
               fmt::format("Content-Encoding {}: not accepted (a compressed body could inflate past the body "
                           "limit); expected an uncompressed body",
                           enc.substr(0, 32)));
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Expect: 100-continue with a declared body over the limit: 413 at once, not 100 first.
  http.set_expect_100_continue_handler([s](const httplib::Request& req, httplib::Response& res) {
    const std::string length = req.get_header_value("Content-Length");
    if (length.empty()) return 100;  // chunked: the limit applies while the body is read
    uint64_t n = 0;
    const auto [ptr, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
    const double limit = s->options().max_body_mb * 1024 * 1024;
    if (ec == std::errc() && ptr == length.data() + length.size() && static_cast<double>(n) <= limit) return 100;
    send_error(res, 413,
               fmt::format("a body of {} bytes: more than the {} MiB limit (--max-body-mb)", length.substr(0, 32),
                           s->options().max_body_mb));
    res.set_header("Connection", "close");
    return 413;
  });
  http.Post("/v1/predict", [s](const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader) {
    answer(*s, "/v1/predict", true, req, res, [&] {
      const PredictBody body = read_predict_body(req, res, reader, s->options().max_body_mb);
      if (s->card().language_model())
        throw HttpError(400,
                        fmt::format("model '{}' is a language model: POST /v1/completions with "
                                    "{{\"prompt\": ...}}, not /v1/predict",
                                    s->card().model));
      const std::shared_ptr<const ServedWeights> w = s->weights().current();
      if (!w) throw HttpError(503, "no weights published yet: try again once /readyz answers 200");
      const int64_t classes = s->card().spec.num_classes;
      const int64_t top_k = int_param(req, "top_k", std::min<int64_t>(s->options().top_k, classes), 1, classes);
      const InputRules rules{&s->card(), s->options().resize};
      const Tensor inputs = preprocess(predict_images(req, body, rules), rules);
      const Prediction p = s->batcher().submit(inputs, w).get();
      res.set_content(prediction_json(s->card(), p, top_k), "application/json");
    });
  });
  http.Post("/v1/completions", [s](const httplib::Request& req, httplib::Response& res) {
    answer(*s, "/v1/completions", true, req, res, [&] {
      if (!s->card().language_model())
        throw HttpError(
            400, fmt::format("model '{}' is an image classifier: POST images to /v1/predict; "
                             "/v1/completions needs GPT weights",
                             s->card().model));
      const CompletionRequest r =
          parse_completion_request(req.body, s->card(), s->options().max_completion_tokens);
      const std::shared_ptr<const ServedWeights> w = s->weights().current();
      if (!w) throw HttpError(503, "no weights published yet: try again once /readyz answers 200");
      if (r.stream) return stream_completion(s->completer(), s->card(), r, w, res);
      const CompletionHeader head = completion_header(s->card(), w->version);
      const Completion c = s->completer().submit(r.spec, w).get();
      res.set_content(completion_json(s->card(), head, c), "application/json");
    });
  });
  http.Post("/v1/samples", [s](const httplib::Request& req, httplib::Response& res) {
    answer(*s, "/v1/samples", true, req, res, [&] {
      if (!s->online())
        throw HttpError(404, "this server takes no samples: POST /v1/samples needs a run behind it (tandem train --serve)");
      const InputRules rules{&s->card(), s->options().resize};
      std::vector<RawImage> images;
      std::vector<int64_t> labels;
      sample_records(req, rules, images, labels);
      const int64_t size = s->online()->add(preprocess(images, rules), labels);
      s->metrics().set_online(size, s->online()->capacity(), s->online_mix());
      res.set_content(samples_json(*s, static_cast<int64_t>(labels.size())), "application/json");
    });
  });
  http.Get("/v1/model", [s](const httplib::Request& req, httplib::Response& res) {
    answer(*s, "/v1/model", true, req, res, [&] { res.set_content(model_json(*s), "application/json"); });
  });
  http.Get("/healthz", [s](const httplib::Request& req, httplib::Response& res) {
    answer(*s, "/healthz", false, req, res, [&] { res.set_content("{\"status\":\"ok\"}", "application/json"); });
  });
  http.Get("/readyz", [s](const httplib::Request& req, httplib::Response& res) {
    answer(*s, "/readyz", false, req, res, [&] {
      const auto w = s->weights().current();
      if (!w) throw HttpError(503, "no weights published yet");
      res.set_content(fmt::format("{{\"status\":\"ready\",\"version\":{}}}", w->version), "application/json");
    });
  });
  http.Get("/metrics", [s](const httplib::Request& req, httplib::Response& res) {
    answer(*s, "/metrics", true, req, res, [&] {
      if (s->online()) s->metrics().set_online(s->online()->size(), s->online()->capacity(), s->online_mix());
      res.set_content(s->metrics().render(), "text/plain; version=0.0.4; charset=utf-8");
    });
  });
  // Paths no endpoint takes with this method: 405 with Allow for a known path, else 404.
  const httplib::Server::Handler fallback = [](const httplib::Request& req, httplib::Response& res) {
    for (const Endpoint& e : kEndpoints) {
      if (req.path != e.path) continue;
      res.set_header("Allow", e.method);
      send_error(res, 405, fmt::format("{} does not take {}: expected {}", e.path, req.method, e.method));
      return;
    }
    send_error(res, 404,
               fmt::format("no endpoint {}: expected /v1/predict, /v1/completions, /v1/model, "
                           "/v1/samples, /healthz, /readyz or /metrics",
                           req.path.substr(0, 128)));
  };
  http.Get(".*", fallback);
  http.Post(".*", fallback);
  http.Put(".*", fallback);
  http.Patch(".*", fallback);
  http.Delete(".*", fallback);
  http.Options(".*", fallback);
  const double max_mb = s->options().max_body_mb;
  http.set_error_handler(httplib::Server::HandlerWithResponse([s, max_mb](const httplib::Request& req,
                                                                          httplib::Response& res) {
    s->metrics().count_error(res.status);
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = fmt::format("HTTP {}", res.status);
    if (res.status == 413) message = fmt::format("the request body is over --max-body-mb {} MiB", max_mb);
    if (res.status == 400) message = "malformed or incomplete HTTP request";
    if (res.status == 404) message = fmt::format("no endpoint {}", req.path.substr(0, 128));
    res.set_content(error_json(res.status, message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    } catch (...) {
      send_error(res, 500, "unknown error");
    }
  });
}

}  // namespace tandem::serve
