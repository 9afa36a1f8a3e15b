// tests/cpp/exporters/test_http_server.cpp -- status codes, exact headers, limits, port conflicts, stop
#include <gtest/gtest.h>

#include <thread>

#include "http_client.hpp"
#include "vramscope/exporters/http_server.hpp"
#include "vramscope/exporters/prometheus.hpp"
#include "vramscope/status.hpp"

namespace vramscope::exporters {
namespace {

/// A server on a free loopback port, serving on its own thread for the test's lifetime.
struct RunningServer {
  HttpServer server{"127.0.0.1", 0, [](const std::string& path) {
                      HttpResponse response;
                      if (path == "/metrics") {
                        response.content_type = std::string(prometheus_content_type);
                        response.body = "vramscope_up 1\n";
                      } else {
                        response.status = 404;
                        response.body = "no\n";
                      }
                      return response;
                    }};
  std::thread thread{[this] { server.serve(); }};
  ~RunningServer() {
    server.stop();
    thread.join();
  }
};

TEST(HttpServer, ServesMetricsWithTheExactContentType) {
  RunningServer running;
  ASSERT_GT(running.server.port(), 0);
  const std::string answer = test::http_get(running.server.port(), "/metrics?x=1");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0U) << answer;
  EXPECT_NE(answer.find("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            std::string::npos);
  EXPECT_NE(answer.find("\r\nContent-Length: 15\r\n"), std::string::npos);
  EXPECT_EQ(answer.substr(answer.size() - 15), "vramscope_up 1\n");
}

TEST(HttpServer, StatusCodesForOtherRequests) {
  RunningServer running;
  const int port = running.server.port();
  EXPECT_EQ(test::http_get(port, "/nope").rfind("HTTP/1.1 404 ", 0), 0U);
  EXPECT_EQ(test::http_exchange(port, "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405 ", 0),
            0U);
  EXPECT_EQ(test::http_exchange(port, "garbage\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0U);
  const std::string head = test::http_exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0U);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "HEAD must not send a body";
  const std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_EQ(test::http_exchange(port, huge).rfind("HTTP/1.1 431 ", 0), 0U);
  EXPECT_EQ(running.server.request_count(), 5U);
}

TEST(HttpServer, PortInUseIsAClearError) {
  RunningServer running;
  try {
    HttpServer second("127.0.0.1", running.server.port(),
                      [](const std::string&) { return HttpResponse{}; });
    FAIL() << "a second server bound the same port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
}

TEST(HttpServer, BadHostIsAClearError) {
  EXPECT_THROW(
      HttpServer("not-an-address.invalid", 0, [](const std::string&) { return HttpResponse{}; }),
      Error);
}

TEST(HttpServer, StopBeforeServeReturnsImmediately) {
  HttpServer server("127.0.0.1", 0, [](const std::string&) { return HttpResponse{}; });
  server.stop();
  server.serve();  // must not block
  SUCCEED();
}

}  // namespace
}  // namespace vramscope::exporters
