// cpp-httplib's Server with a connection loop of our own (process_and_close_socket is the hook
// httplib 0.11 leaves to a subclass), because its loop
//  - keeps a connection alive after a request that timed out half read: the 400 goes out and
//    the thread then waits the keep-alive time (5 s) on a client that has already stalled once,
//    so a slowloris client holds its thread for read timeout + keep-alive;
//  - lets a client trickle a request in a byte at a time for ever (the read timeout is per read);
//  - tells a handler nothing about its socket until it writes.
// Here a request that could not be read (timeout, deadline, peer gone) closes its connection, the
// head and body of a request must arrive within the request timeout, and a handler can ask
// whether its client is still connected (client_connected()).
#pragma once

#include <httplib.h>

#include <chrono>

namespace k3::server {

class HttpServer : public httplib::Server {
 public:
  // A request's head and body must arrive within `timeout` of its first byte (and no read may
  // wait longer than the read timeout); past it the request fails and its connection closes.
  HttpServer& set_request_timeout(std::chrono::milliseconds timeout) {
    request_timeout_ = timeout;
    return *this;
  }

 private:
  bool process_and_close_socket(socket_t sock) override;
  std::chrono::milliseconds request_timeout_{30000};
};

// Called from a handler: false once the client of the request this thread is handling has
// closed its connection or reset it (true outside a handler). A client that shuts down only its
// sending side counts as gone too (HTTP clients do not do that while waiting for an answer).
bool client_connected();

}  // namespace k3::server
