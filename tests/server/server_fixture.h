// Shared by the server tests: one tiny chat model per test binary (built with k3 init), a
// server running in-process on a free loopback port, and small HTTP/SSE helpers.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/tiny_model.h"
#include "k3/model.h"
#include "k3/server.h"
#include "k3/tokenizer.h"

namespace k3::test {

using json = nlohmann::json;

struct TinyModel {
  explicit TinyModel(int64_t max_positions = 4096)
      : path(make_tiny_chat_model(dir, 7, max_positions)) {}
  TempDir dir;
  std::string path;
  std::unique_ptr<Model> model = Model::load(path);
  Tokenizer tok = Tokenizer::load(path);
};

inline TinyModel& tiny() {
  static TinyModel* m = new TinyModel();  // lives for the whole binary
  return *m;
}

// A Server on 127.0.0.1 and a free port, serving from a thread until destroyed.
class LiveServer {
 public:
  explicit LiveServer(ServerOptions opt = {}, const TinyModel& m = tiny())
      : server_(*m.model, m.tok, with_free_port(std::move(opt))) {
    std::signal(SIGPIPE, SIG_IGN);  // a write to a client that left must not end the test
    port_ = server_.bind();
    thread_ = std::thread([this] { server_.run(); });
  }
  ~LiveServer() {
    server_.stop(0);
    thread_.join();
  }
  int port() const { return port_; }
  Server& server() { return server_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }

 private:
  static ServerOptions with_free_port(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    return o;
  }
  Server server_;
  int port_ = -1;
  std::thread thread_;
};

struct Reply {
  int status = 0;
  json body;
  std::string text;
  std::string retry_after;
};

inline Reply post(const LiveServer& s, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}) {
  httplib::Client c = s.client();
  auto r = c.Post(path.c_str(), headers, body, "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  out.retry_after = r->get_header_value("Retry-After");
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

inline Reply get(const LiveServer& s, const std::string& path) {
  httplib::Client c = s.client();
  auto r = c.Get(path.c_str());
  Reply out;
  if (!r) {
    out.text = httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.text = r->body;
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

// The "data: ..." payloads of an SSE body, in order ("[DONE]" kept as text).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string ev = body.substr(pos, end - pos);
    if (ev.rfind("data: ", 0) == 0) out.push_back(ev.substr(6));
    pos = end + 2;
  }
  return out;
}

struct StreamReply {
  int status = 0;
  std::vector<std::string> events;  // the "data: " payloads
  bool aborted = false;             // the client stopped reading and closed the connection
  std::string error;                // the client's error when there is no reply
};

// POSTs a streaming request and reads its SSE events; with cancel_after >= 0, hangs up after
// that many events (a client that goes away mid-stream), and also once *hang_up is true.
inline StreamReply stream_post(const LiveServer& s, const std::string& path,
                               const std::string& body, int cancel_after = -1,
                               const std::atomic<bool>* hang_up = nullptr) {
  httplib::Client c = s.client();
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  StreamReply out;
  std::string buf;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    for (size_t e; (e = buf.find("\n\n")) != std::string::npos;) {
      if (buf.rfind("data: ", 0) == 0) out.events.push_back(buf.substr(6, e - 6));
      buf.erase(0, e + 2);
    }
    if ((cancel_after >= 0 && static_cast<int>(out.events.size()) >= cancel_after) ||
        (hang_up != nullptr && hang_up->load())) {
      out.aborted = true;
      return false;
    }
    return true;
  };
  auto r = c.send(req);
  if (r)
    out.status = r->status;
  else
    out.error = httplib::to_string(r.error());
  return out;
}

// One Prometheus sample value ("name" or "name{labels}"); -1 when absent.
inline double metric(const std::string& text, const std::string& name) {
  size_t pos = 0;
  while ((pos = text.find(name + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + name.size() + 1));
    pos += name.size();
  }
  return -1;
}

inline json chat_body(const std::string& user, int max_tokens, double temperature = 0) {
  return {{"model", "k3"},
          {"messages", {{{"role", "user"}, {"content", user}}}},
          {"max_tokens", max_tokens},
          {"temperature", temperature}};
}

}  // namespace k3::test
