// Driving the scheduler directly (no HTTP): submit requests, wait for their answers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/scheduler.h"
#include "server/server_fixture.h"

namespace k3::test {

struct Outcome {
  std::vector<int32_t> ids;
  std::string text;
  server::Finish finish;
};

// Waits (bounded: 120 s) for the request to finish; collects its tokens and text.
inline Outcome wait_for(server::RequestChannel& ch) {
  Outcome o;
  std::vector<server::TokenEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::optional<server::Finish> fin;
  while (!(fin = ch.wait(events, std::chrono::milliseconds(50)))) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "request did not finish within 120 s";
      ch.cancel();
      return o;
    }
  }
  for (const server::TokenEvent& e : events) {
    if (e.id >= 0) o.ids.push_back(e.id);
    o.text += e.text;
  }
  o.finish = *fin;
  return o;
}

inline std::shared_ptr<server::RequestChannel> greedy(std::vector<int32_t> prompt,
                                                      int64_t max_tokens) {
  server::GenRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  return std::make_shared<server::RequestChannel>(std::move(r));
}

// Polls until the scheduler has nothing queued or running (bounded: 30 s).
inline bool settle(const server::Scheduler& s) {
  for (int i = 0; i < 3000; ++i) {
    if (s.idle()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace k3::test
