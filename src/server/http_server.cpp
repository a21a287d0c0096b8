#include "server/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "k3/error.h"
#include "server/worker_pool.h"

namespace k3 {

using server::ApiError;
using server::json;

namespace {
constexpr size_t kHttpThreadsKept = 8;  // HTTP threads a quiet server keeps
constexpr int kHttpThreadIdleS = 30;    // an extra thread idle this long goes away
}  // namespace

struct Server::Impl {
  Impl(const Model& model, const Tokenizer& tokenizer, ServerOptions o)
      : tok(tokenizer),
        opt(std::move(o)),
        scheduler(model, tok, scheduler_options(opt), metrics),
        ctx{tok, opt, {opt.n_ctx, opt.model_name}, metrics, scheduler} {
    routes();
  }

  static server::SchedulerOptions scheduler_options(const ServerOptions& o) {
    return {.parallel = o.parallel,
            .max_queue = o.max_queue,
            .n_ctx = o.n_ctx,
            .step_tokens = o.step_tokens,
            .cache_bytes = o.cache_bytes,
            .cache_entries = o.cache_entries,
            .cache_every = o.cache_every,
            .block_tokens = o.block_tokens,
            .step_delay_ms = o.test_step_delay_ms};
  }

  void routes();
  bool authorized(const httplib::Request& req) const {
    if (opt.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return true;
    return req.get_header_value("Authorization") == "Bearer " + opt.api_key;
  }
  // Runs a handler, turning ApiError (and any other exception) into an OpenAI error body.
  template <typename F>
  void guarded(httplib::Response& res, F&& f) {
    try {
      f();
    } catch (const ApiError& e) {
      server::send_error(res, e);
    } catch (const std::exception& e) {
      server::send_error(res, ApiError(500, e.what(), "", "server_error"));
    }
  }

  Tokenizer tok;
  ServerOptions opt;
  server::Metrics metrics;
  server::Scheduler scheduler;
  server::HttpContext ctx;
  server::HttpServer http;
  std::atomic<bool> draining{false};
  int port = -1;
  socket_t listen_fd = -1;
};

namespace server {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

}  // namespace server

void Server::Impl::routes() {
  // A connection holds its HTTP thread for its life: up to every running and queued request at
  // once, plus room for /metrics, /health and clients beyond the queue that get their 429.
  const size_t most = opt.http_threads > 0 ? static_cast<size_t>(opt.http_threads)
                                           : static_cast<size_t>(opt.parallel + opt.max_queue + 16);
  http.new_task_queue = [this, most] {
    return new server::WorkerPool(std::min<size_t>(kHttpThreadsKept, most), most,
                                  std::chrono::seconds(kHttpThreadIdleS), &metrics.http_threads);
  };
  http.set_payload_max_length(opt.max_body_bytes);
  // httplib listens with a backlog of 5: a burst of clients would see resets. Remember the
  // listening socket so that bind() can raise the backlog (listen() again does that).
  http.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });
  http.set_read_timeout(opt.read_timeout_s, 0);
  http.set_request_timeout(std::chrono::seconds(opt.request_timeout_s));
  http.set_keep_alive_timeout(5);
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    server::send_error(res, ApiError(401, "missing or wrong API key (Authorization: Bearer KEY)",
                                     "", "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    metrics.count_response(res.status);
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = res.status == 404   ? "no route " + req.method + " " + req.path
                             : res.status == 413 ? "the request body is too large"
                                                 : "bad request";
    server::send_error(res, ApiError(res.status, what));
  });
  http.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        std::fprintf(stderr, "k3 serve: internal error on %s %s: %s\n", req.method.c_str(),
                     req.path.c_str(), what.c_str());
        server::send_error(res, ApiError(500, what, "", "server_error"));
      });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining) {
      res.status = 503;
      res.set_content(R"({"status":"shutting down"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", opt.model_name},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "k3"},
              {"max_model_len", opt.n_ctx}};
    res.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(),
                    "application/json");
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(server::kChatPage, "text/html; charset=utf-8");
  });
  auto generate = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        if (draining) throw ApiError(503, "the server is shutting down", "", "server_error");
        server::handle_generate(ctx, req, res, chat);
      });
    };
  };
  http.Post("/v1/chat/completions", generate(true));
  http.Post("/v1/completions", generate(false));
}

Server::Server(const Model& model, const Tokenizer& tokenizer, ServerOptions options)
    : impl_(std::make_unique<Impl>(model, tokenizer, std::move(options))) {}
Server::~Server() = default;

int Server::bind() {
  Impl& s = *impl_;
  s.port = s.opt.port == 0 ? s.http.bind_to_any_port(s.opt.host)
                           : (s.http.bind_to_port(s.opt.host, s.opt.port) ? s.opt.port : -1);
  check(s.port > 0, "cannot listen on ", s.opt.host, ":", s.opt.port,
        " (in use, or not an address of this machine)");
  check(::listen(s.listen_fd, 1024) == 0, "cannot listen on ", s.opt.host, ":", s.port);
  return s.port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop(double grace_s) {
  Impl& s = *impl_;
  s.draining = true;
  s.scheduler.drain();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (!s.scheduler.idle() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s.scheduler.cancel_all();
  while (!s.scheduler.idle()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s.http.stop();
}

std::string Server::url() const { return cat("http://", impl_->opt.host, ":", impl_->port, "/"); }

}  // namespace k3
