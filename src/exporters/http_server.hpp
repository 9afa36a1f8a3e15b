// src/exporters/http_server.hpp -- the small HTTP/1.1 server behind `vramscope exporter`
//
// Why our own: Debian's cpp-httplib is a split build whose implementation lives in a shared
// library, and the vramscope binary is shipped (in wheels too) needing only libc and ncurses.
// The exporter needs very little: GET/HEAD of two paths, answered from memory, one request per
// connection. Every limit is explicit: request head <= 8 KiB, 5 s socket timeouts, a fixed
// worker pool and a bounded accept queue, so a slow or hostile client cannot pin the process.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
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

/// Accepts connections on one address and answers GET/HEAD with the handler.
class HttpServer {
 public:
  /// Binds `host:port` (port 0 picks a free one). Throws vramscope::Error naming the address and
  /// the reason (e.g. "address already in use") when it cannot.
  HttpServer(const std::string& host, int port, HttpHandler handler, unsigned worker_count = 2);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The bound port (the chosen one when 0 was asked).
  int port() const { return m_port; }
  /// Runs the accept loop on the calling thread until stop().
  void serve();
  /// Makes serve() return and joins the workers; safe from any thread, idempotent.
  void stop();
  /// Requests answered so far (any status).
  uint64_t request_count() const { return m_request_count.load(); }

 private:
  void worker();
  void handle(int fd);

  HttpHandler m_handler;
  int m_listen_fd = -1;
  int m_wake_fds[2] = {-1, -1};
  int m_port = 0;
  std::atomic<bool> m_stopping{false};
  std::atomic<uint64_t> m_request_count{0};
  std::mutex m_mutex;
  std::condition_variable m_ready;
  std::deque<int> m_pending;
  std::vector<std::thread> m_workers;
};

}  // namespace vramscope::exporters
