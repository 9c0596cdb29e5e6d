// The scripted completion (see script.py for what and when) served by cpp-httplib, the HTTP
// library under llama.cpp's llama-server.
//
// cpp-httplib frames the answer itself: a streamed answer comes from a chunked content
// provider, a whole one from set_content (Content-Length). Its own settings: keep-alive
// timeout (whole seconds) and keep-alive max count (the Nth answer on a connection says
// Connection: close), both left at the library's defaults (5 s, 5 requests) unless given.
// Built with zlib, it gzips a whole JSON answer when the request accepts gzip. Every status
// line says "HTTP/1.1".
//
//   g++ -std=c++17 server.cpp $(pkg-config --cflags --libs cpp-httplib) -pthread -o interop-cpp
//   ./interop-cpp --port 8000 [--idle-timeout 1] [--max-requests 3] [--close-after-stream 1]
//
// --close-after-stream: the stream's provider returns false after sink.done(), as llama.cpp's
// llama-server does (tools/server/server-http.cpp: `return has_next;`). cpp-httplib reads that as
// a cancelled write and closes the connection after a complete, terminated answer that announced
// keep-alive: the next request on that connection races the close.
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>

using Clock = std::chrono::steady_clock;

struct Script {
  double ttft = 0.05, itl = 0.01;
  int tokens = 8;

  Clock::time_point due(Clock::time_point arrived, int k) const {
    return arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttft + k * itl));
  }
  std::string usage() const {
    auto n = std::to_string(tokens);
    return "{\"prompt_tokens\":0,\"completion_tokens\":" + n + ",\"total_tokens\":" + n + "}";
  }
  static std::string event(const std::string &fields) {
    return "data: {\"id\":\"interop\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"interop\"," + fields +
           "}\n\n";
  }
  std::string chunk(int k) const {
    std::string finish = k == tokens - 1 ? "\"length\"" : "null";
    return event("\"choices\":[{\"index\":0,\"delta\":{\"content\":\" t" + std::to_string(k) +
                 "\"},\"finish_reason\":" + finish + "}]");
  }
  // Token k in the named events of the Responses (/v1/responses) or Messages (/v1/messages) API, the
  // opening event before the first; named_tail: the closing events with the usage.
  static std::string named(const std::string &name, const std::string &fields) {
    return "event: " + name + "\ndata: {\"type\":\"" + name + "\"" + fields + "}\n\n";
  }
  std::string named_chunk(const std::string &path, int k) const {
    auto t = std::to_string(k);
    if (path == "/v1/responses")
      return (k == 0 ? named("response.created", ",\"response\":{\"id\":\"interop\",\"status\":\"in_progress\"}") : "") +
             named("response.output_text.delta", ",\"delta\":\" t" + t + "\"");
    return (k == 0 ? named("message_start",
                           ",\"message\":{\"id\":\"interop\",\"usage\":{\"input_tokens\":0,\"output_tokens\":1}}")
                   : "") +
           named("content_block_delta", ",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" t" + t + "\"}");
  }
  std::string named_tail(const std::string &path) const {
    auto n = std::to_string(tokens);
    if (path == "/v1/responses")
      return named("response.completed", ",\"response\":{\"id\":\"interop\",\"status\":\"completed\",\"usage\":{"
                                         "\"input_tokens\":0,\"output_tokens\":" + n + "}}");
    return named("message_delta", ",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":" + n + "}") +
           named("message_stop", "");
  }
  std::string whole() const {
    std::string text;
    for (int k = 0; k < tokens; k++) text += " t" + std::to_string(k);
    return "{\"id\":\"interop\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"interop\",\"choices\":[{\"index\":0,"
           "\"message\":{\"role\":\"assistant\",\"content\":\"" +
           text + "\"},\"finish_reason\":\"length\"}],\"usage\":" + usage() + "}";
  }
};

// Completion requests per client port: cpp-httplib names a connection by its peer only.
struct Connections {
  std::mutex mu;
  std::map<int, int> per;

  void seen(int port) {
    std::lock_guard<std::mutex> lock(mu);
    per[port]++;
  }
  std::string report() {
    std::lock_guard<std::mutex> lock(mu);
    int requests = 0, most = 0;
    for (auto &[port, n] : per) {
      requests += n;
      most = std::max(most, n);
    }
    return "{\"requests\":" + std::to_string(requests) + ",\"connections\":" + std::to_string(per.size()) +
           ",\"most\":" + std::to_string(most) + "}";
  }
};

// The request body is JSON; two booleans are all the script needs from it.
static bool flag(const std::string &body, const char *name) {
  return std::regex_search(body, std::regex(std::string("\"") + name + "\"\\s*:\\s*true"));
}

int main(int argc, char **argv) {
  Script script;
  int port = 0, max_requests = 0;
  bool close_after_stream = false;
  double idle = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string name = argv[i];
    double value = std::stod(argv[i + 1]);
    if (name == "--port") port = int(value);
    else if (name == "--ttft") script.ttft = value;
    else if (name == "--itl") script.itl = value;
    else if (name == "--tokens") script.tokens = int(value);
    else if (name == "--idle-timeout") idle = value;
    else if (name == "--max-requests") max_requests = int(value);
    else if (name == "--close-after-stream") close_after_stream = value != 0;
    else {
      std::fprintf(stderr, "unknown option %s\n", name.c_str());
      return 2;
    }
  }
  Connections connections;
  httplib::Server server;
  // Nagle's algorithm is on by default, and a whole answer leaves as two writes (head, then
  // body): on a kept-alive connection the body waits for the ACK of the head, which the
  // client's kernel delays by 40 ms. curl and http.client see the same, so it says nothing
  // about the client under test; llama.cpp's server keeps the default (docs/compatibility.md).
  server.set_tcp_nodelay(true);
  if (idle > 0) server.set_keep_alive_timeout(time_t(idle));
  if (max_requests > 0) server.set_keep_alive_max_count(size_t(max_requests));

  server.Get("/health", [](const httplib::Request &, httplib::Response &res) { res.set_content("ok", "text/plain"); });
  server.Get("/stats", [&](const httplib::Request &, httplib::Response &res) {
    res.set_content(connections.report(), "application/json");
  });
  auto complete = [&](const httplib::Request &req, httplib::Response &res) {
    auto arrived = Clock::now();
    connections.seen(req.remote_port);
    if (!flag(req.body, "stream")) {
      std::this_thread::sleep_until(script.due(arrived, script.tokens - 1));
      res.set_content(script.whole(), "application/json");
      return;
    }
    bool usage = flag(req.body, "include_usage");
    res.set_header("Cache-Control", "no-cache");
    auto next = std::make_shared<int>(0);  // the provider is called again after every write
    std::string path = req.path;
    res.set_chunked_content_provider("text/event-stream", [&script, arrived, usage, next, close_after_stream, path](
                                                             size_t, httplib::DataSink &sink) {
      bool chat = path == "/v1/chat/completions";
      if (*next < script.tokens) {
        std::this_thread::sleep_until(script.due(arrived, *next));
        int k = (*next)++;
        auto data = chat ? script.chunk(k) : script.named_chunk(path, k);
        return sink.write(data.data(), data.size());
      }
      std::string tail = !chat  ? script.named_tail(path)
                         : usage ? Script::event("\"choices\":[],\"usage\":" + script.usage()) + "data: [DONE]\n\n"
                                 : "data: [DONE]\n\n";
      sink.write(tail.data(), tail.size());
      sink.done();
      return !close_after_stream;
    });
  };
  for (const char *path : {"/v1/chat/completions", "/v1/responses", "/v1/messages"}) server.Post(path, complete);
  std::printf("cpp-httplib %s listening on http://127.0.0.1:%d\n", CPPHTTPLIB_VERSION, port);
  std::fflush(stdout);
  return server.listen("127.0.0.1", port) ? 0 : 1;
}
