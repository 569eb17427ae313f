// The HTTP endpoints of InferenceServer (tandem/serve/server.h documents them), registered on
// a cpp-httplib server, and the answers to requests no endpoint takes (404, 405) or that
// httplib refuses itself (413, 400): all one-line JSON errors, counted in the metrics.
// Thread-safety: the handlers run on httplib's connection threads, concurrently.
#pragma once

#include <httplib.h>

#include "tandem/serve/server.h"

namespace tandem::serve {

void add_routes(httplib::Server& http, InferenceServer& server);

}  // namespace tandem::serve
