// src/exporters/http_server.cpp -- minimal, bounded HTTP/1.1 server (GET/HEAD, Connection: close)
#include "vramscope/exporters/http_server.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::exporters {

namespace {

/// Bytes read and thrown away after an error answer before closing (see Phase::Draining).
constexpr std::size_t max_drain_bytes = 128 * 1024;
/// How long a connection may take to drain once answered.
constexpr auto drain_time = std::chrono::milliseconds(500);
/// Connections accepted per turn of the loop, so a flood cannot starve the ones already open.
constexpr int accepts_per_turn = 64;
/// How long to stop accepting when out of file descriptors with nothing left to evict.
constexpr int fd_exhaustion_pause_ms = 100;

using Clock = std::chrono::steady_clock;

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

std::string response_text(const HttpResponse& response, bool head_only) {
  std::string text = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n"
      "X-Content-Type-Options: nosniff\r\n{}\r\n",
      response.status, reason_phrase(response.status), response.content_type, response.body.size(),
      response.status == 405 ? "Allow: GET, HEAD\r\n" : "");
  if (!head_only) text += response.body;
  return text;
}

HttpResponse plain(int status, const std::string& text) {
  HttpResponse response;
  response.status = status;
  response.body = text + "\n";
  return response;
}

}  // namespace

/// One client, from accept to close.
struct HttpServer::Connection {
  enum class Phase {
    /// Collecting the request head.
    Reading,
    /// Sending the answer (non-blocking; resumed when the socket is writable).
    Writing,
    /// Answered with an error while the client may still be sending: reading and discarding a
    /// bounded amount first, as closing with unread input sends RST, and the client could lose
    /// the answer.
    Draining,
  };
  int fd = -1;
  Phase phase = Phase::Reading;
  Clock::time_point accepted_at;
  /// Past this the connection is closed, whatever its phase.
  Clock::time_point deadline;
  std::string input;
  std::string output;
  std::size_t sent_bytes = 0;
  std::size_t drained_bytes = 0;
  /// Should the connection drain after the answer is sent?
  bool drain_after = false;
  /// Is the connection finished (closed at the end of this turn)?
  bool done = false;
};

HttpServer::HttpServer(const std::string& host, int port, HttpHandler handler, HttpLimits limits)
    : m_handler(std::move(handler)), m_limits(limits) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  const std::string shown =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port_text;
  if (const int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    throw Error("cannot listen on " + shown + ": " + ::gai_strerror(rc));
  }
  int last_errno = 0;
  for (addrinfo* ai = found; ai != nullptr && m_listen_fd < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    // SO_REUSEADDR only (restart while old connections sit in TIME_WAIT); never SO_REUSEPORT,
    // which would let a second exporter share the port instead of failing loudly.
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0 &&
        ::fcntl(fd, F_SETFL, O_NONBLOCK) == 0) {
      m_listen_fd = fd;
      break;
    }
    last_errno = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (m_listen_fd < 0) throw Error("cannot listen on " + shown + ": " + errno_text(last_errno));

  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(m_listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
  m_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(m_wake_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(m_listen_fd);
    throw Error(std::string("cannot create a pipe: ") + errno_text(errno));
  }
  m_limits.max_connections = std::max<std::size_t>(m_limits.max_connections, 1);
}

HttpServer::~HttpServer() {
  stop();
  if (m_listen_fd >= 0) ::close(m_listen_fd);
  for (const int fd : m_wake_fds) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpServer::serve() {
  std::vector<Connection> connections;
  std::vector<pollfd> fds;
  Clock::time_point accept_paused_until{};
  while (!m_stopping.load()) {
    const Clock::time_point now = Clock::now();
    const bool accepting = now >= accept_paused_until;
    fds.clear();
    fds.push_back({m_wake_fds[0], POLLIN, 0});
    fds.push_back({accepting ? m_listen_fd : -1, POLLIN, 0});
    Clock::time_point next_deadline = accepting ? Clock::time_point::max() : accept_paused_until;
    for (const Connection& c : connections) {
      fds.push_back(
          {c.fd, static_cast<short>(c.phase == Connection::Phase::Writing ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - now).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if ((fds[0].revents & POLLIN) != 0) break;
    for (std::size_t i = 0; i < connections.size(); ++i) {
      const short events = fds[i + 2].revents;
      if (events == 0) continue;
      Connection& c = connections[i];
      if (c.phase == Connection::Phase::Writing) {
        if ((events & (POLLOUT | POLLERR | POLLHUP)) != 0) on_writable(c);
      } else {
        on_readable(c);
      }
    }
    const Clock::time_point after = Clock::now();
    for (Connection& c : connections) {
      if (!c.done && after >= c.deadline) {
        c.done = true;
        if (c.phase != Connection::Phase::Draining) ++m_dropped_count;
      }
      if (c.done) ::close(c.fd);
    }
    std::erase_if(connections, [](const Connection& c) { return c.done; });
    // Out of descriptors with nothing left to evict: the listen socket would stay readable and
    // spin the loop, so it is left out of the poll for a moment.
    if (accepting && (fds[1].revents & POLLIN) != 0 && !accept_pending(connections)) {
      accept_paused_until = Clock::now() + std::chrono::milliseconds(fd_exhaustion_pause_ms);
    }
  }
  for (const Connection& c : connections) ::close(c.fd);
}

bool HttpServer::accept_pending(std::vector<Connection>& connections) {
  for (int accepted = 0; accepted < accepts_per_turn; ++accepted) {
    if (connections.size() >= m_limits.max_connections) {
      // Full: the oldest connection makes room (connections are kept in accept order).
      ::close(connections.front().fd);
      connections.erase(connections.begin());
      ++m_dropped_count;
    }
    const int fd = ::accept4(m_listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        if (connections.empty()) return false;
        // Out of descriptors: free one for the next turn.
        ::close(connections.front().fd);
        connections.erase(connections.begin());
        ++m_dropped_count;
      }
      return true;  // EAGAIN: the backlog is empty
    }
    Connection c;
    c.fd = fd;
    c.accepted_at = Clock::now();
    c.deadline = c.accepted_at + std::chrono::milliseconds(m_limits.request_timeout_ms);
    connections.push_back(std::move(c));
  }
  return true;
}

void HttpServer::on_readable(Connection& c) {
  char buffer[4096];
  if (c.phase == Connection::Phase::Draining) {
    const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
    if (n > 0) c.drained_bytes += static_cast<std::size_t>(n);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
        c.drained_bytes >= max_drain_bytes) {
      c.done = true;
    }
    return;
  }
  // Never read past the limit (+1 byte, to tell "exactly at the limit" from "over it").
  const std::size_t room = m_limits.max_head_bytes + 1 - c.input.size();
  const ssize_t n = ::recv(c.fd, buffer, std::min(room, sizeof buffer), 0);
  if (n < 0) {
    if (errno != EAGAIN && errno != EINTR) c.done = true;
    return;
  }
  if (n == 0) {
    c.done = true;  // closed before a full request: nothing to answer
    return;
  }
  c.input.append(buffer, static_cast<std::size_t>(n));
  const std::string_view head(c.input.data(), std::min(c.input.size(), m_limits.max_head_bytes));
  if (head.find("\r\n\r\n") != std::string_view::npos ||
      head.find("\n\n") != std::string_view::npos) {
    answer(c);
  } else if (c.input.size() > m_limits.max_head_bytes) {
    c.output = response_text(plain(431, "request head too large"), false);
    c.drain_after = true;
    c.phase = Connection::Phase::Writing;
    ++m_request_count;
    on_writable(c);
  }
}

void HttpServer::answer(Connection& c) {
  ++m_request_count;
  const std::size_t line_end = c.input.find_first_of("\r\n");
  const std::string line = c.input.substr(0, line_end);
  const std::size_t first_space = line.find(' ');
  const std::size_t second_space =
      first_space == std::string::npos ? std::string::npos : line.find(' ', first_space + 1);
  HttpResponse response;
  bool head_only = false;
  if (first_space == std::string::npos || second_space == std::string::npos ||
      line.compare(second_space + 1, 5, "HTTP/") != 0) {
    response = plain(400, "bad request");
    c.drain_after = true;
  } else {
    const std::string method = line.substr(0, first_space);
    std::string target = line.substr(first_space + 1, second_space - first_space - 1);
    if (const auto query = target.find('?'); query != std::string::npos) target.resize(query);
    head_only = method == "HEAD";
    if (method != "GET" && !head_only) {
      response = plain(405, "only GET and HEAD are served");
      c.drain_after = true;  // a POST may be followed by its body
    } else {
      try {
        response = m_handler(target);
      } catch (const std::exception& e) {
        response = plain(500, e.what());
      }
    }
  }
  c.input.clear();
  c.input.shrink_to_fit();
  c.output = response_text(response, head_only);
  c.phase = Connection::Phase::Writing;
  on_writable(c);
}

void HttpServer::on_writable(Connection& c) {
  while (c.sent_bytes < c.output.size()) {
    const ssize_t n =
        ::send(c.fd, c.output.data() + c.sent_bytes, c.output.size() - c.sent_bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the socket buffer is full: resumed on POLLOUT
    if (n <= 0) {
      c.done = true;
      return;
    }
    c.sent_bytes += static_cast<std::size_t>(n);
  }
  if (!c.drain_after) {
    c.done = true;
    return;
  }
  ::shutdown(c.fd, SHUT_WR);
  c.output.clear();
  c.phase = Connection::Phase::Draining;
  c.deadline = std::min(c.deadline, Clock::now() + drain_time);
}

void HttpServer::stop() {
  if (m_stopping.exchange(true)) return;
  const char byte = 1;
  [[maybe_unused]] const ssize_t ignored = ::write(m_wake_fds[1], &byte, 1);
}

}  // namespace vramscope::exporters
