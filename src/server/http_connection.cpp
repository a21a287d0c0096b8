#include "server/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace k3::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int ms_until(Clock::time_point t) {
  const auto left = std::chrono::ceil<milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// poll() for `events` on one socket for up to `ms`, across EINTR; true when ready (or in error:
// the read or write that follows reports it).
bool wait_ready(int fd, short events, int ms) {
  const auto until = Clock::now() + milliseconds(ms);
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_until(until));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// The peer has neither closed nor reset the connection (data it sent ahead does not count).
bool peer_open(int fd) {
  char c;
  for (;;) {
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return true;
    if (n == 0) return false;  // orderly shutdown
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ip.clear();
  port = 0;
  if (rc != 0) return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, buf, sizeof buf);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, buf, sizeof buf);
    port = ntohs(v6.sin6_port);
  }
  ip = buf;
}

// One accepted connection: buffered reads bounded by the read timeout and by the current
// request's deadline, writes bounded by the write timeout. Remembers a failed read: the
// connection is then closed after the answer (a 400) instead of kept alive.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(socket_t fd, milliseconds read_timeout, milliseconds write_timeout)
      : fd_(fd), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  // Waits up to `idle` for the next request, waking to see whether the server is stopping.
  bool wait_for_request(milliseconds idle, const std::atomic<socket_t>& listening) {
    if (head_ < tail_) return true;
    const auto until = Clock::now() + idle;
    while (listening != INVALID_SOCKET) {
      const int left = ms_until(until);
      if (wait_ready(fd_, POLLIN, std::min(left, 50))) return true;
      if (left == 0) return false;
    }
    return false;
  }
  void begin_request(Clock::time_point deadline) { deadline_ = deadline; }
  bool read_failed() const { return read_failed_; }

  bool is_readable() const override { return head_ < tail_ || wait_ready(fd_, POLLIN, budget()); }
  bool is_writable() const override {
    return wait_ready(fd_, POLLOUT, static_cast<int>(write_timeout_.count())) && peer_open(fd_);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (head_ == tail_ && !fill()) return -1;
    const size_t n = std::min(size, tail_ - head_);
    std::memcpy(ptr, buf_ + head_, n);
    head_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_ready(fd_, POLLOUT, static_cast<int>(write_timeout_.count()))) return -1;
    for (;;) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // Milliseconds the next read may wait: the read timeout, cut at the request's deadline.
  int budget() const {
    return std::min(static_cast<int>(read_timeout_.count()), ms_until(deadline_));
  }
  bool fill() {
    head_ = tail_ = 0;
    if (!wait_ready(fd_, POLLIN, budget())) return fail();
    for (;;) {
      const ssize_t n = ::recv(fd_, buf_, sizeof buf_, 0);
      if (n > 0) {
        tail_ = static_cast<size_t>(n);
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      return fail();  // closed, reset, or nothing after all (a timeout)
    }
  }
  bool fail() {
    read_failed_ = true;
    return false;
  }

  socket_t fd_;
  milliseconds read_timeout_, write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  char buf_[4096];
  size_t head_ = 0, tail_ = 0;
  bool read_failed_ = false;
};

thread_local socket_t t_client = INVALID_SOCKET;  // the connection this thread is serving

// Sets t_client for one connection's lifetime on this thread.
struct ServingClient {
  explicit ServingClient(socket_t fd) { t_client = fd; }
  ~ServingClient() { t_client = INVALID_SOCKET; }
  ServingClient(const ServingClient&) = delete;
  ServingClient& operator=(const ServingClient&) = delete;
};

milliseconds ms_of(time_t sec, time_t usec) {
  return milliseconds(static_cast<int64_t>(sec) * 1000 + static_cast<int64_t>(usec) / 1000);
}

}  // namespace

bool HttpServer::process_and_close_socket(socket_t sock) {
  ConnectionStream strm(sock, ms_of(read_timeout_sec_, read_timeout_usec_),
                        ms_of(write_timeout_sec_, write_timeout_usec_));
  const ServingClient serving(sock);
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!strm.wait_for_request(ms_of(keep_alive_timeout_sec_, 0), svr_sock_)) break;
    strm.begin_request(Clock::now() + request_timeout_);
    bool closed_by_client = false;
    ok = process_request(strm, left == 1, closed_by_client, {});
    if (!ok || closed_by_client || strm.read_failed()) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

bool client_connected() { return t_client == INVALID_SOCKET || peer_open(t_client); }

}  // namespace k3::server
