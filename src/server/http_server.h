// The HTTP side of k3::Server: routes, authentication, error bodies and the two generation
// endpoints (in http_generate.cpp), over cpp-httplib.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>

#include "k3/server.h"
#include "server/http_connection.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/scheduler.h"

namespace k3::server {

struct HttpContext {
  const Tokenizer& tok;
  ServerOptions opt;
  ApiLimits limits;
  Metrics& metrics;
  Scheduler& scheduler;
};

// Answers a parsed-or-not generation request; chat selects the endpoint.
void handle_generate(HttpContext& ctx, const httplib::Request& req, httplib::Response& res,
                     bool chat);
void send_error(httplib::Response& res, const ApiError& e);
extern const char* const kChatPage;  // the web chat page served at /

}  // namespace k3::server
