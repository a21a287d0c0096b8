// The server under load over real loopback sockets: 64 concurrent streams with random client
// disconnects (no leak, no 5xx, greedy answers equal one-at-a-time answers), 429 with
// Retry-After when full, slowloris clients not blocking others, graceful stop.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <random>

#include "server/server_fixture.h"

namespace k3::test {
namespace {

// Everything the deltas said, in order, and the finish reason ("" when none came).
struct StreamText {
  std::string text, finish;
  bool done = false;  // ended with [DONE]
};

StreamText text_of(const StreamReply& r) {
  StreamText t;
  for (const std::string& e : r.events) {
    if (e == "[DONE]") {
      t.done = true;
      continue;
    }
    const json c = json::parse(e, nullptr, false);
    if (c.is_discarded() || !c.contains("choices") || c["choices"].empty()) continue;
    const json& ch = c["choices"][0];
    const json& d = ch.contains("delta") ? ch["delta"] : json::object();
    for (const char* k : {"reasoning_content", "content"})
      if (d.contains(k) && d[k].is_string()) t.text += d[k].get<std::string>();
    if (ch.contains("text")) t.text += ch["text"].get<std::string>();
    if (!ch["finish_reason"].is_null()) t.finish = ch["finish_reason"];
  }
  return t;
}

// Polls /metrics until nothing is queued or running (bounded: 30 s); returns the text.
std::string settled_metrics(const LiveServer& s) {
  std::string m;
  for (int i = 0; i < 300; ++i) {
    m = get(s, "/metrics").text;
    if (metric(m, "k3_running_sequences") == 0 && metric(m, "k3_queue_depth") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return m;
}

int responses_5xx(const std::string& m) {
  int n = 0;
  for (int code = 500; code < 600; ++code) {
    const double v = metric(m, "k3_http_responses_total{code=\"" + std::to_string(code) + "\"}");
    if (v > 0) n += static_cast<int>(v);
  }
  return n;
}

json stream_body(int prompt, int max_tokens) {
  json b =
      chat_body("Question number " + std::to_string(prompt) + ": what comes next?", max_tokens);
  b["stream"] = true;
  b["chat_template_kwargs"] = {{"thinking", prompt % 2 == 0}};
  return b;
}

TEST(ServerLoad, SixtyFourStreamsWithRandomCancellations) {
  LiveServer s({.n_ctx = 1024, .parallel = 8, .max_queue = 64, .cache_bytes = 0});
  constexpr int kStreams = 64, kPrompts = 16, kTokens = 10;
  std::vector<StreamReply> replies(kStreams);
  std::vector<int> cancel_after(kStreams, -1);
  std::mt19937 rng(42);
  for (int i = 0; i < kStreams; ++i)
    if (rng() % 4 == 0) cancel_after[i] = 1 + static_cast<int>(rng() % 4);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      const auto t0 = std::chrono::steady_clock::now();
      replies[i] = stream_post(s, "/v1/chat/completions", stream_body(i % kPrompts, kTokens).dump(),
                               cancel_after[i]);
      replies[i].error +=
          " after " +
          std::to_string(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) +
          " s";
    });
  }
  for (std::thread& t : clients) t.join();
  const std::string m = settled_metrics(s);
  // One at a time, after the load: the reference answers.
  std::map<int, StreamText> reference;
  for (int p = 0; p < kPrompts; ++p)
    reference[p] = text_of(stream_post(s, "/v1/chat/completions", stream_body(p, kTokens).dump()));
  int completed = 0, cancelled = 0;
  for (int i = 0; i < kStreams; ++i) {
    const StreamText t = text_of(replies[i]);
    if (replies[i].aborted) {
      ++cancelled;
      continue;
    }
    ++completed;
    EXPECT_EQ(replies[i].status, 200) << "stream " << i << ": " << replies[i].error;
    EXPECT_TRUE(t.done) << "stream " << i;
    EXPECT_FALSE(t.finish.empty()) << "stream " << i;
    EXPECT_EQ(t.text, reference[i % kPrompts].text) << "stream " << i;
  }
  EXPECT_GT(cancelled, 5);
  EXPECT_GT(completed, 30);
  EXPECT_EQ(metric(m, "k3_running_sequences"), 0);
  EXPECT_EQ(metric(m, "k3_queue_depth"), 0);
  EXPECT_EQ(metric(m, "k3_engine_free_blocks"), metric(m, "k3_engine_total_blocks")) << m;
  EXPECT_EQ(metric(m, "k3_engine_free_entries"), metric(m, "k3_engine_max_entries")) << m;
  EXPECT_EQ(responses_5xx(m), 0) << m;
  EXPECT_GE(metric(m, "k3_requests_cancelled_total"), 1);
}

TEST(ServerLoad, FullServerAnswers429AndADisconnectFreesTheSlot) {
  // 10 ms per step: the held stream lasts until the hang-up, even when a loaded machine delays
  // the /metrics polls below (the tiny model writes its 4096 tokens in ~0.2 s otherwise).
  LiveServer s({.parallel = 1, .max_queue = 0, .cache_bytes = 0, .test_step_delay_ms = 10});
  std::atomic<bool> hang_up{false};
  StreamReply long_reply;
  std::thread holder([&] {
    long_reply =
        stream_post(s, "/v1/chat/completions", stream_body(1, 100000).dump(), -1, &hang_up);
  });
  std::string m;
  for (int i = 0; i < 300 && metric(m, "k3_running_sequences") != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = get(s, "/metrics").text;
  }
  ASSERT_EQ(metric(m, "k3_running_sequences"), 1);
  Reply busy = post(s, "/v1/chat/completions", chat_body("me too", 2).dump());
  EXPECT_EQ(busy.status, 429) << busy.text;
  EXPECT_EQ(busy.retry_after, "1");
  EXPECT_EQ(busy.body["error"]["type"], "rate_limit_error");
  hang_up = true;
  holder.join();
  EXPECT_TRUE(long_reply.aborted);
  m = settled_metrics(s);
  EXPECT_EQ(metric(m, "k3_engine_free_blocks"), metric(m, "k3_engine_total_blocks"));
  EXPECT_EQ(metric(m, "k3_engine_free_entries"), metric(m, "k3_engine_max_entries"));
  EXPECT_EQ(post(s, "/v1/chat/completions", chat_body("now?", 2).dump()).status, 200);
}

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True when the server closed the connection within `ms` (an error reply may come first).
bool closed_within(int fd, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  char buf[512];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

// Each stalled connection is answered 400 after the read timeout and closed at once (httplib's
// own loop kept it alive for another 5 s of keep-alive: the first one checked below failed).
TEST(ServerLoad, SlowlorisDoesNotBlockOthers) {
  LiveServer s({.parallel = 2, .max_queue = 4, .http_threads = 16, .read_timeout_s = 1});
  // Eight clients that send half a request header, a byte at a time, and then stall.
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    const int fd = connect_loopback(s.port());
    ASSERT_GE(fd, 0);
    const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le";
    ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    slow.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    for (int fd : slow) send(fd, "n", 1, MSG_NOSIGNAL);
    Reply r = post(s, "/v1/chat/completions", chat_body("quick one", 2).dump());
    EXPECT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(get(s, "/health").status, 200);
  }
  // Once they stop sending, the read timeout (1 s) drops them.
  for (int fd : slow) {
    EXPECT_TRUE(closed_within(fd, 5000)) << "slow client fd " << fd << " of " << slow.front();
    close(fd);
  }
  EXPECT_EQ(post(s, "/v1/chat/completions", chat_body("after", 2).dump()).status, 200);
}

// The HTTP threads grow with the connections held open (each stalled client holds one) and
// /metrics shows them; requests are served all the while.
TEST(ServerLoad, HttpThreadsGrowWithHeldConnections) {
  LiveServer s({.parallel = 2, .max_queue = 8, .read_timeout_s = 2});  // up to 26 threads
  const std::string m0 = get(s, "/metrics").text;
  EXPECT_LE(metric(m0, "k3_http_threads"), 8) << m0;
  std::vector<int> held;
  for (int i = 0; i < 14; ++i) {
    const int fd = connect_loopback(s.port());
    ASSERT_GE(fd, 0);
    const std::string head = "GET /health HTTP/1.1\r\nHo";
    ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    held.push_back(fd);
  }
  double threads = 0;
  for (int i = 0; i < 200 && threads < 15; ++i) {  // the 14 held and this request's own
    threads = metric(get(s, "/metrics").text, "k3_http_threads");
    if (threads < 15) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(threads, 15);
  EXPECT_LE(threads, 26);
  EXPECT_EQ(post(s, "/v1/chat/completions", chat_body("while held", 2).dump()).status, 200);
  for (int fd : held) close(fd);
}

// A client that trickles its request a byte at a time, each within the read timeout, is dropped
// at the request timeout: no single read times out, but the whole request is too slow.
TEST(ServerLoad, TricklingClientIsDroppedAtTheRequestTimeout) {
  LiveServer s({.parallel = 1, .http_threads = 4, .read_timeout_s = 2, .request_timeout_s = 2});
  const int fd = connect_loopback(s.port());
  ASSERT_GE(fd, 0);
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  int sent = 0;
  // A byte every 200 ms (well inside the 2 s read timeout) for up to 8 s.
  for (; sent < 40 && !closed; ++sent) {
    if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) break;
    closed = closed_within(fd, 200);
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!closed) closed = closed_within(fd, 1000);  // a send may have failed on the closed socket
  close(fd);
  // Without the request timeout it would still be open: its last byte came < 2 s ago.
  EXPECT_TRUE(closed) << "still open after " << waited << " s and " << sent << " bytes";
  EXPECT_EQ(post(s, "/v1/chat/completions", chat_body("after", 2).dump()).status, 200);
}

// A client waiting for a whole (non-streaming) answer that closes its socket cancels the
// request: the server, which writes nothing before the end, notices the closed socket and the
// scheduler frees the sequence at its next step.
TEST(ServerLoad, ClosedSocketCancelsAWholeAnswer) {
  // 20 ms per step, stop ids banned: the whole answer (up to the 4096 context) takes > 1 min.
  LiveServer s({.parallel = 1, .cache_bytes = 0, .test_step_delay_ms = 20});
  json body = chat_body("Write a long answer", 100000);
  for (int32_t id : tiny().tok.stop_ids()) body["logit_bias"][std::to_string(id)] = -100;
  const std::string b = body.dump();
  const std::string request =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(b.size()) + "\r\n\r\n" + b;
  const std::string before = get(s, "/metrics").text;
  const int fd = connect_loopback(s.port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string m;
  for (int i = 0; i < 300 && metric(m, "k3_running_sequences") != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = get(s, "/metrics").text;
  }
  ASSERT_EQ(metric(m, "k3_running_sequences"), 1);
  close(fd);
  m = settled_metrics(s);  // at most 30 s; uncancelled, the answer would run for over a minute
  EXPECT_EQ(metric(m, "k3_running_sequences"), 0);
  EXPECT_EQ(metric(m, "k3_requests_cancelled_total"),
            metric(before, "k3_requests_cancelled_total") + 1);
  EXPECT_EQ(metric(m, "k3_engine_free_blocks"), metric(m, "k3_engine_total_blocks")) << m;
  EXPECT_EQ(metric(m, "k3_engine_free_entries"), metric(m, "k3_engine_max_entries")) << m;
  // The handler answers 499 to nobody (logged once its thread wakes: bounded wait).
  const std::string closed_code = "k3_http_responses_total{code=\"499\"}";
  for (int i = 0; i < 100 && metric(m, closed_code) != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = get(s, "/metrics").text;
  }
  EXPECT_EQ(metric(m, closed_code), 1) << m;
  EXPECT_EQ(post(s, "/v1/chat/completions", chat_body("after", 2).dump()).status, 200);
}

TEST(ServerLoad, GracefulStopEndsStreamsCleanly) {
  // A long context and 5 ms per step, so that the stream outlives the grace time on a fast
  // machine too and the /metrics polls see it on a loaded one (4096 tokens of the tiny model
  // take ~0.2 s, less than the drain checks below wait).
  static TinyModel* long_context = new TinyModel(1 << 16);
  auto s = std::make_unique<LiveServer>(
      ServerOptions{.n_ctx = 1 << 16, .parallel = 2, .cache_bytes = 0, .test_step_delay_ms = 5},
      *long_context);
  // Stop tokens banned: the random model must not end the stream by itself before the drain.
  json body = stream_body(3, 100000);
  for (int32_t id : long_context->tok.stop_ids()) body["logit_bias"][std::to_string(id)] = -100;
  StreamReply r;
  std::thread client([&] { r = stream_post(*s, "/v1/chat/completions", body.dump()); });
  std::string m;
  for (int i = 0; i < 300 && metric(m, "k3_running_sequences") != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = get(*s, "/metrics").text;
  }
  ASSERT_EQ(metric(m, "k3_running_sequences"), 1);
  std::thread stopper([&] { s->server().stop(1.0); });
  // While draining: new requests are refused with 503, health says so.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Reply h = get(*s, "/health");
  EXPECT_EQ(h.status, 503) << h.text;
  EXPECT_EQ(post(*s, "/v1/chat/completions", chat_body("late", 2).dump()).status, 503);
  stopper.join();
  client.join();
  const StreamText t = text_of(r);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(t.done);  // cancelled at the end of the grace time, but closed properly
  EXPECT_FALSE(t.finish.empty());
  s.reset();  // run() has returned: the destructor joins at once
}

}  // namespace
}  // namespace k3::test
