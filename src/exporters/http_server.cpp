// src/exporters/http_server.cpp -- minimal, bounded HTTP/1.1 server (GET/HEAD, Connection: close)
#include "exporters/http_server.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "vramscope/status.hpp"

namespace vramscope::exporters {

namespace {

constexpr std::size_t max_request_head_bytes = 8192;
constexpr std::size_t max_pending_connections = 64;
constexpr int socket_timeout_s = 5;

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    default: return "Internal Server Error";
  }
}

bool send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void send_response(int fd, const HttpResponse& response, bool head_only) {
  std::string head = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n"
      "X-Content-Type-Options: nosniff\r\n{}\r\n",
      response.status, reason_phrase(response.status), response.content_type, response.body.size(),
      response.status == 405 ? "Allow: GET, HEAD\r\n" : "");
  if (!send_all(fd, head.data(), head.size()) || head_only) return;
  send_all(fd, response.body.data(), response.body.size());
}

HttpResponse plain(int status, const std::string& text) {
  HttpResponse response;
  response.status = status;
  response.body = text + "\n";
  return response;
}

}  // namespace

HttpServer::HttpServer(const std::string& host, int port, HttpHandler handler, unsigned worker_count)
    : m_handler(std::move(handler)) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  const std::string shown = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port_text;
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
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      m_listen_fd = fd;
      break;
    }
    last_errno = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (m_listen_fd < 0) throw Error("cannot listen on " + shown + ": " + std::strerror(last_errno));

  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(m_listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
  m_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(m_wake_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(m_listen_fd);
    throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  for (unsigned i = 0; i < std::max(1U, worker_count); ++i) m_workers.emplace_back([this] { worker(); });
}

HttpServer::~HttpServer() {
  stop();
  if (m_listen_fd >= 0) ::close(m_listen_fd);
  for (const int fd : m_wake_fds) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpServer::serve() {
  pollfd fds[2] = {{m_listen_fd, POLLIN, 0}, {m_wake_fds[0], POLLIN, 0}};
  while (!m_stopping.load()) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if ((fds[1].revents & POLLIN) != 0) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(m_listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // ECONNABORTED, EMFILE...: keep serving the others
    const timeval timeout{socket_timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_pending.size() >= max_pending_connections) {
      ::close(fd);  // Overloaded: shed rather than queue without bound.
      continue;
    }
    m_pending.push_back(fd);
    m_ready.notify_one();
  }
}

void HttpServer::stop() {
  if (m_stopping.exchange(true)) return;
  const char byte = 1;
  [[maybe_unused]] const ssize_t ignored = ::write(m_wake_fds[1], &byte, 1);
  m_ready.notify_all();
  for (auto& thread : m_workers) {
    if (thread.joinable()) thread.join();
  }
  std::lock_guard<std::mutex> lock(m_mutex);
  for (const int fd : m_pending) ::close(fd);
  m_pending.clear();
}

void HttpServer::worker() {
  for (;;) {
    int fd = -1;
    {
      std::unique_lock<std::mutex> lock(m_mutex);
      m_ready.wait(lock, [this] { return m_stopping.load() || !m_pending.empty(); });
      if (m_stopping.load()) return;
      fd = m_pending.front();
      m_pending.pop_front();
    }
    handle(fd);
    ::close(fd);
  }
}

void HttpServer::handle(int fd) {
  std::string head;
  char buffer[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() > max_request_head_bytes) {
      send_response(fd, plain(431, "request head too large"), false);
      ++m_request_count;
      // Lingering close: closing with unread input would send RST, and the client could lose
      // the answer. Drain a bounded amount first.
      ::shutdown(fd, SHUT_WR);
      for (std::size_t drained = 0; drained < 16 * max_request_head_bytes;) {
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        drained += static_cast<std::size_t>(n);
      }
      return;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed or timed out before a full request: nothing to answer
    head.append(buffer, static_cast<std::size_t>(n));
  }
  ++m_request_count;
  const std::size_t line_end = head.find_first_of("\r\n");
  const std::string line = head.substr(0, line_end);
  const std::size_t first_space = line.find(' ');
  const std::size_t second_space = line.find(' ', first_space + 1);
  if (first_space == std::string::npos || second_space == std::string::npos ||
      line.compare(second_space + 1, 5, "HTTP/") != 0) {
    send_response(fd, plain(400, "bad request"), false);
    return;
  }
  const std::string method = line.substr(0, first_space);
  std::string target = line.substr(first_space + 1, second_space - first_space - 1);
  if (const auto query = target.find('?'); query != std::string::npos) target.resize(query);
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only) {
    send_response(fd, plain(405, "only GET and HEAD are served"), false);
    return;
  }
  HttpResponse response;
  try {
    response = m_handler(target);
  } catch (const std::exception& e) {
    response = plain(500, e.what());
  }
  send_response(fd, response, head_only);
}

}  // namespace vramscope::exporters
