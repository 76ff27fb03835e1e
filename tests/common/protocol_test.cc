#include "common/protocol.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/common/records.h"

namespace ak::protocol {
namespace {

using nlohmann::json;
using ak::testing::as_json;

// Encodes `m`, decodes the frame and returns the message as the type it was sent as.
template <typename T>
T round_trip(const T& m) {
  const std::string frame = encode(m);
  DecodeResult r = decode(frame);
  EXPECT_TRUE(r.ok()) << r.error.message;
  EXPECT_TRUE(std::holds_alternative<T>(*r.message));
  return std::get<T>(*r.message);
}

std::string envelope(const json& body, const std::string& type = "ACK", int v = kProtocolVersion) {
  return json{{"v", v}, {"type", type}, {"body", body}}.dump();
}

ErrorCode code_of(std::string_view frame) {
  DecodeResult r = decode(frame);
  EXPECT_FALSE(r.ok());
  return r.error.code;
}

TEST(ProtocolEncode, TheFrameIsTheVersionedEnvelope) {
  const json env = json::parse(encode(Ack{"job-9", 2}));
  EXPECT_EQ(env["v"], kProtocolVersion);
  EXPECT_EQ(env["type"], "ACK");
  EXPECT_EQ(env["body"], (json{{"job_id", "job-9"}, {"attempt", 2}}));
}

TEST(ProtocolRoundTrip, ReadyKeepsWorkerCapabilitiesAndSlots) {
  const Ready back = round_trip(Ready{"w-1", ak::testing::sample_caps(), 3});
  EXPECT_EQ(back.worker_id, "w-1");
  EXPECT_EQ(back.slots, 3);
  EXPECT_EQ(as_json(back.caps), as_json(ak::testing::sample_caps()));
}

TEST(ProtocolRoundTrip, HeartbeatKeepsEveryInFlightJob) {
  const Heartbeat back = round_trip(Heartbeat{"w-1", {{"job-1", 1}, {"job-2", 4}}});
  EXPECT_EQ(back.worker_id, "w-1");
  ASSERT_EQ(back.in_flight.size(), 2u);
  EXPECT_EQ(back.in_flight[1].job_id, "job-2");
  EXPECT_EQ(back.in_flight[1].attempt, 4);
}

TEST(ProtocolRoundTrip, HeartbeatWithNothingInFlightStaysEmpty) {
  EXPECT_TRUE(round_trip(Heartbeat{"w-1", {}}).in_flight.empty());
}

TEST(ProtocolRoundTrip, ResultKeepsTheWholeResultRecord) {
  const ResultMsg back = round_trip(ResultMsg{"w-1", ak::testing::sample_result()});
  EXPECT_EQ(back.worker_id, "w-1");
  EXPECT_EQ(as_json(back.result), as_json(ak::testing::sample_result()));
}

TEST(ProtocolRoundTrip, DisconnectKeepsItsReason) {
  const Disconnect back = round_trip(Disconnect{"w-1", "SIGTERM"});
  EXPECT_EQ(back.worker_id, "w-1");
  EXPECT_EQ(back.reason, "SIGTERM");
}

TEST(ProtocolRoundTrip, JobKeepsSpecAttemptAndLease) {
  const Job back = round_trip(Job{ak::testing::sample_spec(), 2, 30'000});
  EXPECT_EQ(as_json(back.spec), as_json(ak::testing::sample_spec()));
  EXPECT_EQ(back.attempt, 2);
  EXPECT_EQ(back.lease_ms, 30'000);
}

TEST(ProtocolRoundTrip, AckKeepsJobIdAndAttempt) {
  const Ack back = round_trip(Ack{"job-5", 3});
  EXPECT_EQ(back.job_id, "job-5");
  EXPECT_EQ(back.attempt, 3);
}

TEST(ProtocolRoundTrip, ErrorKeepsEveryCode) {
  for (int c = 0; c <= static_cast<int>(ErrorCode::kInternal); ++c) {
    const Error back = round_trip(Error{static_cast<ErrorCode>(c), "why"});
    EXPECT_EQ(back.code, static_cast<ErrorCode>(c));
    EXPECT_EQ(back.message, "why");
  }
}

TEST(ProtocolRoundTrip, SubmitKeepsTheCampaignDocument) {
  const json campaign = {{"kernel", "softmax"}, {"shapes", {{8, 128}}}};
  EXPECT_EQ(round_trip(Submit{campaign}).campaign, campaign);
}

TEST(ProtocolRoundTrip, StatusLongPollKeepsItsVersionAndWait) {
  auto d = decode(encode(StatusQuery{41, 2000}));
  ASSERT_TRUE(d.ok());
  const auto& q = std::get<StatusQuery>(*d.message);
  EXPECT_EQ(q.after_version, 41);
  EXPECT_EQ(q.wait_ms, 2000);
}

TEST(ProtocolRoundTrip, StatusQueryHasAnEmptyBody) {
  round_trip(StatusQuery{});
  EXPECT_EQ(json::parse(encode(StatusQuery{}))["body"], json::object());
  EXPECT_EQ(json::parse(encode(StatusQuery{}))["type"], "STATUS");
}

TEST(ProtocolRoundTrip, ResultsQueryKeepsItsFilters) {
  const ResultsQuery back = round_trip(ResultsQuery{"camp-1", "PASS", "softmax", "4096x4096", "NVIDIA H200"});
  EXPECT_EQ(back.campaign_id, "camp-1");
  EXPECT_EQ(back.status, "PASS");
  EXPECT_EQ(back.kernel_type, "softmax");
  EXPECT_EQ(back.shape, "4096x4096");
  EXPECT_EQ(back.gpu_model, "NVIDIA H200");
}

TEST(ProtocolRoundTrip, BestQueryKeepsItsFilters) {
  const BestQuery back = round_trip(BestQuery{{"matmul", "cuda", "NVIDIA H200", "bf16", "4096x4096x4096"}});
  EXPECT_EQ(back.query.kernel_type, "matmul");
  EXPECT_EQ(back.query.backend, "cuda");
  EXPECT_EQ(back.query.gpu_model, "NVIDIA H200");
  EXPECT_EQ(back.query.dtype, "bf16");
  EXPECT_EQ(back.query.shape, "4096x4096x4096");
}

TEST(ProtocolRoundTrip, ImportBestKeepsItsDocument) {
  const json doc = {{"format", 1}, {"entries", json::array()}};
  EXPECT_EQ(round_trip(ImportBest{doc}).document, doc);
}

TEST(ProtocolRoundTrip, CancelAndCancelJobKeepTheirFields) {
  const Cancel c = round_trip(Cancel{"c42", "superseded"});
  EXPECT_EQ(c.campaign_id, "c42");
  EXPECT_EQ(c.reason, "superseded");
  const CancelJob j = round_trip(CancelJob{"c42-000007", 2});
  EXPECT_EQ(j.job_id, "c42-000007");
  EXPECT_EQ(j.attempt, 2);
}

TEST(ProtocolRoundTrip, ReplyKeepsItsBody) {
  const json body = {{"jobs", 12}, {"done", 3}};
  EXPECT_EQ(round_trip(Reply{body}).body, body);
}

TEST(ProtocolNames, EveryMessageTypeHasADistinctWireName) {
  const std::vector<Message> all = {Ready{}, Heartbeat{}, ResultMsg{}, Disconnect{}, Job{}, Ack{},
                                    CancelJob{}, Error{}, Submit{}, StatusQuery{}, ResultsQuery{},
                                    BestQuery{}, Cancel{}, ImportBest{}, Reply{}};
  std::set<std::string> names;
  for (const auto& m : all) names.insert(type_name(m));
  EXPECT_EQ(names.size(), all.size());
  EXPECT_EQ(std::variant_size_v<Message>, all.size()) << "a message type was added; add it here";
}

TEST(ProtocolNames, EveryErrorCodeHasADistinctName) {
  std::set<std::string> names;
  for (int c = 0; c <= static_cast<int>(ErrorCode::kInternal); ++c)
    names.insert(error_code_name(static_cast<ErrorCode>(c)));
  EXPECT_EQ(names.size(), static_cast<size_t>(ErrorCode::kInternal) + 1);
}

TEST(ProtocolDecode, GarbageBytesAreMalformed) {
  EXPECT_EQ(code_of(std::string("\x00\xff\x13garbage", 10)), ErrorCode::kMalformed);
}

TEST(ProtocolDecode, AnEmptyFrameIsMalformed) { EXPECT_EQ(code_of(""), ErrorCode::kMalformed); }

TEST(ProtocolDecode, JsonThatIsNotAnObjectIsMalformed) {
  EXPECT_EQ(code_of("[1,2,3]"), ErrorCode::kMalformed);
  EXPECT_EQ(code_of("42"), ErrorCode::kMalformed);
  EXPECT_EQ(code_of("\"READY\""), ErrorCode::kMalformed);
  EXPECT_EQ(code_of("null"), ErrorCode::kMalformed);
}

TEST(ProtocolDecode, AnObjectWithoutTheEnvelopeIsMalformed) {
  EXPECT_EQ(code_of(R"({"job_id":"j","attempt":1})"), ErrorCode::kMalformed);
  EXPECT_EQ(code_of(R"({"v":1,"type":"ACK"})"), ErrorCode::kMalformed);
  EXPECT_EQ(code_of(R"({"type":"ACK","body":{}})"), ErrorCode::kMalformed);
}

TEST(ProtocolDecode, EnvelopeFieldsOfTheWrongTypeAreMalformed) {
  EXPECT_EQ(code_of(R"({"v":"1","type":"ACK","body":{}})"), ErrorCode::kMalformed);
  EXPECT_EQ(code_of(R"({"v":1,"type":7,"body":{}})"), ErrorCode::kMalformed);
  EXPECT_EQ(code_of(R"({"v":1,"type":"ACK","body":[]})"), ErrorCode::kMalformed);
}

TEST(ProtocolDecode, AnotherProtocolVersionIsBadVersionAndNamesBothVersions) {
  DecodeResult r = decode(envelope({{"job_id", "j"}, {"attempt", 1}}, "ACK", kProtocolVersion + 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.code, ErrorCode::kBadVersion);
  EXPECT_NE(r.error.message.find(std::to_string(kProtocolVersion + 1)), std::string::npos);
  EXPECT_NE(r.error.message.find(std::to_string(kProtocolVersion)), std::string::npos);
}

TEST(ProtocolDecode, AnUnknownTypeIsUnknownType) {
  DecodeResult r = decode(envelope(json::object(), "STEAL_GPU"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.code, ErrorCode::kUnknownType);
  EXPECT_NE(r.error.message.find("STEAL_GPU"), std::string::npos);
}

TEST(ProtocolDecode, TypeNamesAreCaseSensitive) {
  EXPECT_EQ(code_of(envelope({{"job_id", "j"}, {"attempt", 1}}, "ack")), ErrorCode::kUnknownType);
}

TEST(ProtocolDecode, ABodyMissingARequiredFieldIsBadBody) {
  EXPECT_EQ(code_of(envelope({{"attempt", 1}}, "ACK")), ErrorCode::kBadBody);
  EXPECT_EQ(code_of(envelope({{"worker_id", "w"}}, "READY")), ErrorCode::kBadBody);
}

TEST(ProtocolDecode, ABodyFieldOfTheWrongTypeIsBadBody) {
  EXPECT_EQ(code_of(envelope({{"job_id", "j"}, {"attempt", "one"}}, "ACK")), ErrorCode::kBadBody);
  EXPECT_EQ(code_of(envelope({{"worker_id", "w"}, {"in_flight", 5}}, "HEARTBEAT")), ErrorCode::kBadBody);
}

TEST(ProtocolDecode, AJobWithAnUnknownDTypeIsBadBody) {
  json body = json::parse(encode(Job{ak::testing::sample_spec(), 1, 1000}))["body"];
  body["spec"]["dtype"] = "fp4";
  EXPECT_EQ(code_of(envelope(body, "JOB")), ErrorCode::kBadBody);
}

TEST(ProtocolDecode, AFrameOverTheLimitIsOversizedWithoutBeingParsed) {
  // Valid JSON, so only the size check can reject it.
  std::string frame = envelope({{"job_id", std::string(kMaxFrameBytes, 'x')}, {"attempt", 1}});
  DecodeResult r = decode(frame);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.code, ErrorCode::kOversized);
  EXPECT_NE(r.error.message.find(std::to_string(kMaxFrameBytes)), std::string::npos);
}

TEST(ProtocolDecode, AFrameOfExactlyTheLimitIsNotOversized) {
  const std::string head = R"({"v":1,"type":"ACK","body":{"attempt":1,"job_id":")";
  const std::string tail = R"("}})";
  std::string frame = head + std::string(kMaxFrameBytes - head.size() - tail.size(), 'x') + tail;
  ASSERT_EQ(frame.size(), kMaxFrameBytes);
  EXPECT_TRUE(decode(frame).ok());
}

TEST(ProtocolDecode, AnExplicitLimitReplacesTheDefaultOne) {
  const std::string frame = encode(Ack{"job-1", 1});
  EXPECT_EQ(decode(frame, frame.size() - 1).error.code, ErrorCode::kOversized);
  EXPECT_TRUE(decode(frame, frame.size()).ok());
}

TEST(ProtocolDecode, InvalidUtf8InsideAStringIsMalformedNotAnException) {
  std::string frame = R"({"v":1,"type":"ACK","body":{"attempt":1,"job_id":"a)" + std::string("\xc3\x28") + R"("}})";
  EXPECT_NO_THROW(EXPECT_EQ(code_of(frame), ErrorCode::kMalformed));
}

TEST(ProtocolDecode, EveryTruncationOfAValidFrameFailsWithoutThrowing) {
  const std::string frame = encode(ResultMsg{"w-1", ak::testing::sample_result()});
  for (size_t n = 0; n < frame.size(); ++n) {
    DecodeResult r;
    ASSERT_NO_THROW(r = decode(std::string_view(frame).substr(0, n))) << "prefix of " << n << " bytes";
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes decoded";
    EXPECT_NE(r.error.code, ErrorCode::kUnknown);
  }
}

TEST(ProtocolEncode, InvalidUtf8InAFieldIsReplacedRatherThanThrown) {
  ResultRecord r = ak::testing::sample_result();
  r.reason = std::string("compiler said \xff\xfe");
  std::string frame;
  ASSERT_NO_THROW(frame = encode(ResultMsg{"w-1", r}));
  EXPECT_TRUE(decode(frame).ok());
}

}  // namespace
}  // namespace ak::protocol
