// src/exporters/include/vramscope/exporters/http_server.hpp -- the small HTTP/1.1 server behind `vramscope exporter`
//
// Why our own: Debian's cpp-httplib is a split build whose implementation lives in a shared
// library, and the vramscope binary is shipped (in wheels too) needing only libc and ncurses.
// The exporter needs very little: GET/HEAD of two paths, answered from memory, one request per
// connection. One thread polls every connection (non-blocking sockets), so no client can hold a
// worker. Every limit is explicit (HttpLimits): a request head of at most 8 KiB, a deadline for
// the whole exchange counted from accept (not per recv: a client trickling one byte a second
// is dropped all the same), and a bounded number of open connections where a new one evicts
// the oldest, so idle or slow clients can delay a scrape by at most their deadline, never stop
// it. stop() returns at once, whatever the clients do.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vramscope::exporters {

/// What a handler answers.
struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// Answers one request; `path` excludes the query string. Must be thread-safe.
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

/// What one client may cost the server.
struct HttpLimits {
  /// Longest request head accepted, its closing blank line included; longer ones get 431.
  std::size_t max_head_bytes = 8192;
  /// Connections open at once. Accepting one more closes the oldest: a legitimate scrape takes
  /// milliseconds, so the oldest is the one most likely to be idle or hostile.
  std::size_t max_connections = 128;
  /// From accept to the last byte of the answer; a client slower than this is disconnected.
  int request_timeout_ms = 5000;
};

/// Accepts connections on one address and answers GET/HEAD with the handler.
class HttpServer {
 public:
  /// Binds `host:port` (port 0 picks a free one). Throws vramscope::Error naming the address and
  /// the reason (e.g. "address already in use") when it cannot.
  HttpServer(const std::string& host, int port, HttpHandler handler, HttpLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The bound port (the chosen one when 0 was asked).
  int port() const { return m_port; }
  /// Runs the server on the calling thread until stop(); the handler is called on this thread.
  /// Every connection still open is closed when it returns.
  void serve();
  /// Makes serve() return promptly, without waiting for any client; safe from any thread and
  /// idempotent.
  void stop();
  /// Requests answered so far (any status).
  uint64_t request_count() const { return m_request_count.load(); }
  /// Connections closed because their deadline passed or a newer one needed the room.
  uint64_t dropped_count() const { return m_dropped_count.load(); }

 private:
  struct Connection;
  /// Accepts what the backlog holds (a bounded batch); false when out of file descriptors with
  /// no connection left to close.
  bool accept_pending(std::vector<Connection>& connections);
  void on_readable(Connection& connection);
  void on_writable(Connection& connection);
  void answer(Connection& connection);

  HttpHandler m_handler;
  HttpLimits m_limits;
  int m_listen_fd = -1;
  int m_wake_fds[2] = {-1, -1};
  int m_port = 0;
  std::atomic<bool> m_stopping{false};
  std::atomic<uint64_t> m_request_count{0};
  std::atomic<uint64_t> m_dropped_count{0};
};

}  // namespace vramscope::exporters
