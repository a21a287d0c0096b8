// k3 serve as a library: an OpenAI-compatible HTTP server (POST /v1/chat/completions and
// /v1/completions, streamed as SSE or whole; GET /v1/models, /health, /metrics, the chat page
// at /) over one scheduler thread that batches every running request into each engine step
// (continuous batching, chunked prefill, a prefix cache of KDA + MLA state snapshots).
// Built as the k3server library (links cpp-httplib); docs/SERVER.md describes the API.
//
//   k3::Server server(*model, tokenizer, {.port = 0, .parallel = 8});
//   int port = server.bind();           // throws k3::Error when it cannot listen
//   std::thread t([&] { server.run(); });
//   ...
//   server.stop(5.0);                   // refuse new requests, let running ones finish (5 s)
//   t.join();
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "k3/model.h"
#include "k3/tokenizer.h"

namespace k3 {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (bind() returns it)
  int64_t n_ctx = 4096;           // per request: prompt + completion tokens
  int64_t parallel = 4;           // requests decoding together (sequences in a step)
  int64_t max_queue = 64;         // requests waiting beyond `parallel`; more get 429
  int64_t step_tokens = 256;      // tokens per step: decodes first, then prompt chunks
  size_t cache_bytes = 64 << 20;  // prefix cache budget; 0 turns it off
  int64_t cache_entries = 256;    // prefix cache snapshots at most
  int64_t cache_every = 64;       // snapshot boundary (tokens; a multiple of block_tokens)
  int64_t block_tokens = 16;      // MLA cache block size
  std::string api_key = "";       // when set, /v1/* need "Authorization: Bearer KEY"
  std::string model_name = "k3";  // the id /v1/models reports
  int http_threads = 0;  // HTTP threads at most (started on demand); 0: parallel + max_queue + 16
  size_t max_body_bytes = 8 << 20;
  int read_timeout_s = 10;     // a client that sends nothing for this long is dropped
  int request_timeout_s = 30;  // a request's head and body must arrive within this long
  // Test knob, not for users: the scheduler sleeps this long after each engine step, so that a
  // tiny test model streams slowly enough for a browser to press Stop mid-answer.
  int test_step_delay_ms = 0;
};

class Server {
 public:
  // Throws k3::Error on bad options (naming the option).
  Server(const Model& model, const Tokenizer& tokenizer, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int bind();  // listens on host:port; returns the port
  void run();  // serves until stop(); call after bind()
  // Graceful: new requests get 503, running ones may finish for up to grace_s seconds, the
  // rest are cancelled, then run() returns. Thread-safe (not async-signal-safe).
  void stop(double grace_s);
  std::string url() const;  // http://host:port/

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3
