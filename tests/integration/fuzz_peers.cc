// ak_fuzz_peers: a hostile peer for the coordinator's worker and client ports (issue 19). For a
// bounded time it sends, from several connections that it replaces now and then, a mix of frames
// a coordinator must refuse cheaply: random bytes, deeply nested JSON (up to a million levels),
// frames just over the protocol limit and over ZeroMQ's hard cap, valid envelopes with garbage
// bodies, unknown types and versions, extra frames. It never sends a valid READY, so it takes no
// jobs from the farm. Replies are read and dropped. Used by fuzz_farm_test and bench/fuzz.sh.
//   ak_fuzz_peers --workers tcp://127.0.0.1:5555 --clients tcp://127.0.0.1:5556 --seconds 120 [--seed 1]
//                 [--only 0123] (frame kinds, see frame_of_kind) [--reconnect 0]
// Prints one line of counts at the end; exit 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace {

struct Args {
  std::string workers, clients;
  double seconds = 5;
  unsigned seed = 1;
  std::string only;  // kinds to send, as digits ("0123"); empty: all
  bool reconnect = true;
};

std::string nested(size_t depth, bool objects) {
  std::string s;
  s.reserve(depth * 6 + 8);
  for (size_t i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
  s += "1";
  for (size_t i = 0; i < depth; ++i) s += objects ? "}" : "]";
  return s;
}

std::string envelope(const std::string& type, const std::string& body, int v = 1) {
  return "{\"v\":" + std::to_string(v) + ",\"type\":\"" + type + "\",\"body\":" + body + "}";
}

class Fuzzer {
 public:
  explicit Fuzzer(const Args& a) : args_(a), rng_(a.seed) {}

  std::vector<std::string> frame_of_kind(int kind, bool to_workers) {
    std::uniform_int_distribution<int> byte(0, 255);
    const std::string type = to_workers ? (rng_() % 2 ? "HEARTBEAT" : "RESULT") : (rng_() % 2 ? "SUBMIT" : "STATUS");
    switch (kind) {
      case 0: {  // random bytes
        std::string s(rng_() % 4096 + 1, '\0');
        for (auto& c : s) c = char(byte(rng_));
        return {s};
      }
      case 1:  // nested JSON inside a valid envelope, arrays or objects, up to a million deep
        return {envelope(type, "{\"campaign\":" + nested(size_t(1) << (rng_() % 21), rng_() % 2) + "}")};
      case 2:  // bare nesting
        return {std::string(size_t(1) << (rng_() % 21), '[')};
      case 3:  // just over the protocol limit (4 MiB): an OVERSIZED reply
        return {envelope(type, "{\"x\":\"" + std::string((4u << 20) + 100, 'x') + "\"}")};
      case 4:  // over ZeroMQ's hard cap (8 MiB): the connection is dropped
        return {std::string((9u << 20), 'y')};
      case 5:  // wrong version, unknown type, garbage bodies
        switch (rng_() % 4) {
          case 0:
            return {envelope(type, "{}", 7)};
          case 1:
            return {envelope("NOPE", "{}")};
          case 2:
            return {envelope(type, "{\"worker_id\":12,\"in_flight\":\"x\",\"result\":[1,2]}")};
          default:
            return {envelope(type, "[" + std::string(100'000, '1') + "]")};
        }
      case 6:  // extra frames
        return {envelope(type, "{}"), "second", "third"};
      default: {  // a large valid-JSON array of numbers (costs the parser the most per byte)
        std::string s = "[";
        // Over the value cap (refused by the scan), or just under it (parsed, then refused).
        const int n = rng_() % 2 ? 200'000 : 90'000;
        for (int i = 0; i < n; ++i) s += "1,";
        s += "1]";
        return {envelope(type, "{\"campaign\":" + s + "}")};
      }
    }
  }

  int run() {
    zmq::context_t ctx(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(args_.seconds);
    std::vector<std::unique_ptr<zmq::socket_t>> socks;
    std::vector<bool> is_worker;
    auto make = [&](bool worker) {
      auto s = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
      s->set(zmq::sockopt::linger, 0);
      s->set(zmq::sockopt::sndhwm, 16);
      s->set(zmq::sockopt::sndtimeo, 100);
      s->set(zmq::sockopt::routing_id, "fuzz-" + std::to_string(rng_()));
      s->connect(worker ? args_.workers : args_.clients);
      return s;
    };
    for (int i = 0; i < 8; ++i) {
      is_worker.push_back(i % 2 == 0);
      socks.push_back(make(is_worker.back()));
    }
    long sent = 0, dropped = 0, replies = 0, reconnects = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      const size_t i = rng_() % socks.size();
      if (args_.reconnect && rng_() % 200 == 0) {  // a new connection (and routing id) now and then
        socks[i] = make(is_worker[i]);
        ++reconnects;
      }
      // Big frames are rarer than small ones; nesting and garbage dominate.
      static const int kinds[] = {0, 0, 1, 1, 1, 2, 2, 3, 4, 5, 5, 6, 7};
      const int kind = kinds[rng_() % (sizeof kinds / sizeof kinds[0])];
      if (!args_.only.empty() && args_.only.find(char('0' + kind)) == std::string::npos) continue;
      std::vector<std::string> parts = frame_of_kind(kind, is_worker[i]);
      if (!is_worker[i]) parts.insert(parts.begin(), std::string());  // REQ's empty delimiter
      bool ok = true;
      for (size_t p = 0; p < parts.size() && ok; ++p) {
        try {
          ok = bool(socks[i]->send(zmq::buffer(parts[p]),
                                   p + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none));
        } catch (const zmq::error_t&) {
          ok = false;
        }
      }
      ok ? ++sent : ++dropped;
      if (!ok) socks[i] = make(is_worker[i]);  // a half-sent multipart poisons the socket
      for (auto& s : socks) {
        zmq::message_t m;
        while (s->recv(m, zmq::recv_flags::dontwait)) ++replies;
      }
    }
    std::printf("fuzz: %ld frames sent, %ld not sent (peer queue full), %ld replies, %ld reconnects in %.0f s\n", sent,
                dropped, replies, reconnects, args_.seconds);
    return 0;
  }

 private:
  Args args_;
  std::mt19937 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--workers")
      a.workers = v;
    else if (k == "--clients")
      a.clients = v;
    else if (k == "--seconds")
      a.seconds = std::atof(v.c_str());
    else if (k == "--seed")
      a.seed = unsigned(std::atoi(v.c_str()));
    else if (k == "--only")
      a.only = v;
    else if (k == "--reconnect")
      a.reconnect = v != "0";
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.workers.empty() || a.clients.empty() || !(a.seconds > 0)) {
    std::fprintf(stderr, "usage: ak_fuzz_peers --workers EP --clients EP --seconds N [--seed S]\n");
    return 2;
  }
  return Fuzzer(a).run();
}
