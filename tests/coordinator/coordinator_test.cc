// The Coordinator's socket side (coordinator/coordinator.h) in process: real ZeroMQ sockets on
// ephemeral loopback ports, the in-memory store. What a hostile peer can send before the farm core
// sees anything: frames over the limits and requests over the rate (common/PROTOCOL.md, "Limits").
#include "coordinator/coordinator.h"

#include <atomic>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "coordinator/client.h"
#include "coordinator/store/memory_store.h"

namespace ak {
namespace {

namespace pr = protocol;
using nlohmann::json;

class CoordinatorSockets : public ::testing::Test {
 protected:
  void start(CoordinatorOptions o) {
    o.worker_endpoint = "tcp://127.0.0.1:*";
    o.client_endpoint = "tcp://127.0.0.1:*";
    coordinator = std::make_unique<Coordinator>(o, store, clock, metrics);
    Status s = coordinator->start();
    ASSERT_TRUE(s.ok()) << s.to_string();
    thread = std::thread([this] { (void)coordinator->run(stop); });
  }
  void TearDown() override {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  // One request on a DEALER socket of its own (the REQ envelope by hand); the decoded reply.
  pr::DecodeResult raw_request(const std::string& frame) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(coordinator->client_endpoint());
    std::array<zmq::const_buffer, 2> parts = {zmq::const_buffer(nullptr, 0), zmq::buffer(frame)};
    EXPECT_TRUE(zmq::send_multipart(s, parts));
    std::vector<zmq::message_t> reply;
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::seconds(10));
    if (!(item.revents & ZMQ_POLLIN)) return pr::decode("no reply");
    (void)zmq::recv_multipart(s, std::back_inserter(reply));
    return pr::decode(reply.back().to_string_view(), size_t{1} << 30);
  }
  double protocol_errors(const std::string& kind) {
    for (const auto& family : metrics.registry().Collect())
      for (const auto& m : family.metric)
        for (const auto& l : m.label)
          if (l.name == "kind" && l.value == kind) return m.counter.value;
    return 0;
  }

  MemoryStore store;
  SystemClock clock;
  CoordinatorMetrics metrics;
  std::unique_ptr<Coordinator> coordinator;
  std::atomic<bool> stop{false};
  std::thread thread;
  zmq::context_t ctx{1};
};

TEST_F(CoordinatorSockets, AClientOverItsRateIsAnsweredWithAnErrorNamingTheLimit) {
  CoordinatorOptions o;
  o.client_rate = {/*rate_per_s=*/0.001, /*burst=*/3};
  start(o);
  CoordinatorClient client(coordinator->client_endpoint(), std::chrono::seconds(10));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client.status().ok()) << i;
  auto refused = client.status();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("too many requests from 127.0.0.1"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("0.001 requests per second (bursts of 3)"), std::string::npos)
      << refused.status().message();
  // A new connection from the same address shares the budget.
  CoordinatorClient again(coordinator->client_endpoint(), std::chrono::seconds(10));
  EXPECT_FALSE(again.status().ok());
  EXPECT_EQ(protocol_errors("BAD_REQUEST"), 2);
}

TEST_F(CoordinatorSockets, DeeplyNestedJsonIsAnsweredOversizedAndTheCoordinatorServesOn) {
  start({});
  const std::string deep =
      R"({"v":1,"type":"SUBMIT","body":{"campaign":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}}";
  for (int i = 0; i < 20; ++i) {
    pr::DecodeResult r = raw_request(deep);
    ASSERT_TRUE(r.ok()) << r.error.message;
    auto* e = std::get_if<pr::Error>(&*r.message);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->code, pr::ErrorCode::kOversized);
    EXPECT_NE(e->message.find("deeper than 64 levels"), std::string::npos) << e->message;
  }
  EXPECT_EQ(protocol_errors("OVERSIZED"), 20);
  CoordinatorClient client(coordinator->client_endpoint(), std::chrono::seconds(10));
  EXPECT_TRUE(client.status().ok());
}

TEST_F(CoordinatorSockets, AFrameOverTheProtocolLimitGetsAnExplicitOversizedError) {
  start({});
  const std::string big = pr::encode(pr::Submit{json{{"source", std::string(pr::kMaxFrameBytes + 10, 'x')}}});
  pr::DecodeResult r = raw_request(big);
  ASSERT_TRUE(r.ok()) << r.error.message;
  auto* e = std::get_if<pr::Error>(&*r.message);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, pr::ErrorCode::kOversized);
  EXPECT_NE(e->message.find(std::to_string(pr::kMaxFrameBytes)), std::string::npos) << e->message;
}

TEST_F(CoordinatorSockets, TheClientRefusesARequestOverTheLimitBeforeSendingIt) {
  start({});
  CoordinatorClient client(coordinator->client_endpoint(), std::chrono::seconds(10));
  auto r = client.submit(json{{"kernel_type", "softmax"}, {"source", std::string(50 << 20, 'x')}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  EXPECT_NE(r.status().message().find("exceeds the coordinator's limit of 4194304 bytes"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(protocol_errors("OVERSIZED"), 0);  // never sent
  EXPECT_TRUE(client.status().ok());
}

}  // namespace
}  // namespace ak
