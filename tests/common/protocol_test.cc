#include "common/protocol.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/json_limits.h"
#include "common/result_fields.h"
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

TEST(ProtocolRoundTrip, WorkerMessagesAndErrorsKeepTheirInstance) {
  EXPECT_EQ(round_trip(Ready{"w-1", ak::testing::sample_caps(), 3, "0a1b"}).instance, "0a1b");
  EXPECT_EQ(round_trip(Heartbeat{"w-1", {}, "0a1b"}).instance, "0a1b");
  EXPECT_EQ(round_trip(ResultMsg{"w-1", ak::testing::sample_result(), "0a1b"}).instance, "0a1b");
  EXPECT_EQ(round_trip(Disconnect{"w-1", "SIGTERM", "0a1b"}).instance, "0a1b");
  const Error e = round_trip(Error{ErrorCode::kWorkerIdInUse, "held", "0a1b"});
  EXPECT_EQ(e.code, ErrorCode::kWorkerIdInUse);
  EXPECT_EQ(e.instance, "0a1b");
}

TEST(ProtocolEncode, AWorkerMessageWithoutAnInstanceHasNoInstanceField) {
  const json env = json::parse(encode(Heartbeat{"w-1", {}}));
  EXPECT_EQ(env["body"], (json{{"worker_id", "w-1"}, {"in_flight", json::array()}}));
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
  for (int c = 0; c <= static_cast<int>(kLastErrorCode); ++c) {
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
  for (int c = 0; c <= static_cast<int>(kLastErrorCode); ++c) names.insert(error_code_name(static_cast<ErrorCode>(c)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kLastErrorCode) + 1);
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

TEST(ProtocolDecode, DeeplyNestedJsonIsRefusedBeforeParsing) {
  // 1 MiB of nesting inside a valid envelope: refused by the depth scan, naming the limit.
  const std::string deep = std::string(1 << 19, '[') + std::string(1 << 19, ']');
  const std::string frame = R"({"v":1,"type":"SUBMIT","body":{"campaign":)" + deep + "}}";
  DecodeResult r = decode(frame);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.code, ErrorCode::kOversized);
  EXPECT_NE(r.error.message.find("deeper than 64 levels"), std::string::npos) << r.error.message;
}

TEST(ProtocolDecode, AFrameWithMoreValuesThanTheCapIsRefusedButALargeReplyIsNot) {
  std::string many = "[";
  for (size_t i = 0; i < ak::kMaxJsonValues + 1; ++i) many += "1,";
  many += "1]";
  const std::string frame = R"({"v":1,"type":"SUBMIT","body":{"campaign":)" + many + "}}";
  ASSERT_LE(frame.size(), kMaxFrameBytes);
  DecodeResult r = decode(frame);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.code, ErrorCode::kOversized);
  EXPECT_NE(r.error.message.find("more than 100000 values"), std::string::npos) << r.error.message;
  EXPECT_TRUE(decode(frame, size_t{1} << 30).ok());  // a reply the client asked for
}

TEST(ProtocolDecode, NestingUpToTheLimitStillDecodes) {
  // The envelope and body take two levels; the campaign may use the remaining 62.
  const std::string frame =
      R"({"v":1,"type":"SUBMIT","body":{"campaign":)" + std::string(62, '[') + std::string(62, ']') + "}}";
  EXPECT_TRUE(decode(frame).ok()) << decode(frame).error.message;
  const std::string one_more =
      R"({"v":1,"type":"SUBMIT","body":{"campaign":)" + std::string(63, '[') + std::string(63, ']') + "}}";
  EXPECT_EQ(code_of(one_more), ErrorCode::kOversized);
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

// ---- replies: each struct writes the JSON the client API has always carried and reads it back.

// to_json, then parse_reply<T> of the dumped text: the JSON of what came back must be the same.
template <typename T>
T reply_round_trip(const T& v) {
  const json sent = v;
  auto back = parse_reply<T>(json::parse(sent.dump()));
  EXPECT_TRUE(back.ok()) << back.status().message();
  if (!back.ok()) return T{};
  EXPECT_EQ(json(*back).dump(), sent.dump());
  return *back;
}

StatusReply sample_status() {
  StatusReply st;
  st.jobs = {1, 2, 3, 4};
  st.results = {{"PASS", 3}, {"FAIL", 1}};
  st.workers.push_back({"w-1",
                        "NVIDIA H200",
                        "sm_90a",
                        "0000:19:00.0",
                        {"cuda", "triton"},
                        2,
                        {"job-7"},
                        120,
                        ak::testing::sample_caps().ceilings});
  CampaignRow plain;
  plain.campaign_id = "c-1";
  plain.name = "softmax sweep";
  plain.total = 24;
  plain.finished = 20;
  plain.pass = 18;
  plain.failed = 2;
  plain.best = CampaignBest{"c-1-000003", 12.5, 1.75, "4096x4096", "bf16", "BLOCK=256"};
  plain.submitted_wall_ms = 1'700'000'000'000;
  st.campaigns.push_back(plain);
  CampaignRow study = plain;
  study.campaign_id = "c-2";
  study.best.reset();
  study.is_study = true;
  study.amdahl = {{"nvidia h200", 1.25}};
  StudyRow row;
  row.study = 0;
  row.target = "softmax 4096x4096 bf16";
  row.gpu_model = "NVIDIA H200";
  row.share = 0.4;
  row.trials = 12;
  row.best = StudyBest{10.0, "c-2-s000-000004", "BLOCK=128", 1.5};
  row.stop = "PLATEAU";
  row.done = true;
  study.studies = {row, StudyRow{}};
  study.cancelled = true;
  study.cancelled_jobs = 3;
  study.cancel_reason = "enough";
  st.campaigns.push_back(study);
  st.uptime_s = 12.5;
  st.version = 42;
  st.results_per_hour = 864.0;
  return st;
}

TEST(ProtocolReplies, SubmitReplyRoundTripsWithAndWithoutStudies) {
  EXPECT_EQ(json(SubmitReply{"c-1", 24, "sweep", std::nullopt}),
            (json{{"campaign_id", "c-1"}, {"jobs", 24}, {"name", "sweep"}}));
  EXPECT_FALSE(reply_round_trip(SubmitReply{"c-1", 24, "sweep", std::nullopt}).studies.has_value());
  EXPECT_EQ(reply_round_trip(SubmitReply{"c-2", 4, "study", 2}).studies, 2);
}

TEST(ProtocolReplies, CancelReplyRoundTripsItsCounts) {
  const CancelReply back = reply_round_trip(CancelReply{"c-1", 5, 2, 17});
  EXPECT_EQ(back.campaign_id, "c-1");
  EXPECT_EQ(back.cancelled, 5);
  EXPECT_EQ(back.stopping, 2);
  EXPECT_EQ(back.finished, 17);
}

TEST(ProtocolReplies, ImportBestReplyRoundTripsItsCounts) {
  EXPECT_EQ(json(ImportBestReply{3, 1, 2}), (json{{"entries", 3}, {"stored", 1}, {"kept", 2}}));
  EXPECT_EQ(reply_round_trip(ImportBestReply{3, 1, 2}).kept, 2);
}

TEST(ProtocolReplies, BestReplyIsTheTuningExportDocument) {
  const std::vector<TunedEntry> entries = {ak::testing::sample_tuned(10.5, "job-1")};
  EXPECT_EQ(json(BestReply{1, 1'700'000'000'000, iso_utc(1'700'000'000'000), entries}),
            tuning_export(entries, 1'700'000'000'000));
  const BestReply back = reply_round_trip(BestReply{1, 5, iso_utc(5), entries});
  ASSERT_EQ(back.entries.size(), 1u);
  EXPECT_EQ(back.entries[0].job_id, "job-1");
  EXPECT_DOUBLE_EQ(back.entries[0].m.latency_us, 10.5);
}

TEST(ProtocolReplies, StatusReplyRoundTripsWorkersCampaignsAndStudies) {
  const StatusReply back = reply_round_trip(sample_status());
  ASSERT_EQ(back.campaigns.size(), 2u);
  EXPECT_FALSE(back.campaigns[0].is_study);
  EXPECT_FALSE(back.campaigns[0].cancelled);
  ASSERT_TRUE(back.campaigns[0].best.has_value());
  EXPECT_EQ(back.campaigns[0].best->config, "BLOCK=256");
  EXPECT_TRUE(back.campaigns[1].is_study);
  ASSERT_EQ(back.campaigns[1].studies.size(), 2u);
  EXPECT_EQ(back.campaigns[1].studies[0].best->job_id, "c-2-s000-000004");
  EXPECT_FALSE(back.campaigns[1].studies[1].best.has_value());
  EXPECT_EQ(back.campaigns[1].cancel_reason, "enough");
  EXPECT_EQ(back.workers.at(0).leased, std::vector<std::string>{"job-7"});
  EXPECT_EQ(back.version, 42);
}

TEST(ProtocolReplies, StatusReplyWritesStudyAndCancelKeysOnlyWhereTheyApply) {
  const json j = sample_status();
  EXPECT_FALSE(j["campaigns"][0].contains("kind"));
  EXPECT_FALSE(j["campaigns"][0].contains("cancelled"));
  EXPECT_TRUE(j["campaigns"][0]["best"].is_object());
  EXPECT_EQ(j["campaigns"][1]["kind"], "study");
  EXPECT_TRUE(j["campaigns"][1]["best"].is_null());
  EXPECT_EQ(j["campaigns"][1]["cancelled"], true);
}

TEST(ProtocolReplies, ResultRowReadsBackTheCoordinatorsRowByteForByte) {
  ResultRecord passed = ak::testing::sample_result();
  passed.status = ResultStatus::kPass;
  const json pass = result_row(ak::testing::sample_job(), passed, 7);
  ResultRecord failed = ak::testing::sample_result();
  failed.status = ResultStatus::kFail;
  const json fail = result_row(ak::testing::sample_job(), failed, 8);
  const ResultsReply back = reply_round_trip(parse_reply<ResultsReply>(json{{"rows", {pass, fail}}}).value());
  ASSERT_EQ(back.rows.size(), 2u);
  EXPECT_EQ(json(back.rows[0]).dump(), pass.dump());
  EXPECT_EQ(json(back.rows[1]).dump(), fail.dump());
  EXPECT_TRUE(back.rows[0].latency_us.has_value());
  EXPECT_FALSE(back.rows[1].latency_us.has_value()) << "a failed job is never timed";
  EXPECT_EQ(back.rows[1].correctness, "FAIL");
  EXPECT_EQ(back.rows[0].experiment, 7);
  EXPECT_FALSE(back.rows[0].kernelbench.has_value());
}

TEST(ProtocolReplies, ACacheResidentMemoryBoundRowHasNoPercentOfPeakAndSaysWhy) {
  ResultRecord r = ak::testing::sample_result();
  r.status = ResultStatus::kPass;
  r.m.bound = "memory";
  r.m.cache_resident = true;
  const json row = result_row(ak::testing::sample_job(), r, 1);
  EXPECT_EQ(row["cache_resident"], true);
  EXPECT_TRUE(row["pct_peak"].is_null());
  EXPECT_TRUE(row["pct_peak_datasheet"].is_null());
  EXPECT_EQ(row["bandwidth_gbps"], r.m.bandwidth_gbps);  // the rate itself stays
  const ResultsReply back = reply_round_trip(parse_reply<ResultsReply>(json{{"rows", {row}}}).value());
  EXPECT_EQ(back.rows[0].cache_resident, true);
  EXPECT_EQ(json(back.rows[0]).dump(), row.dump());
  r.m.cache_resident = false;
  EXPECT_EQ(result_row(ak::testing::sample_job(), r, 1)["pct_peak"], 71.5);
}

// A KernelBench job's row as the coordinator sends it: the harness's verdict and the task.
json kernelbench_row(const json& verdict) {
  JobRecord job = ak::testing::sample_job();
  KernelBenchTask t;
  t.mode = "candidate";
  t.level = 1;
  t.problem_id = 19;
  t.problem_name = "19_ReLU.py";
  t.problem_code = "...";
  t.sample_id = 3;
  job.spec.kernel_type = "kernelbench";
  job.spec.kernelbench = t;
  ResultRecord r = ak::testing::sample_result();
  r.kernelbench = verdict;
  return result_row(job, r, 1);
}

TEST(ProtocolReplies, KernelBenchVerdictIsDecodedIntoFields) {
  const json verdict = {{"mode", "candidate"},
                        {"verdict", "correct"},
                        {"compiled", true},
                        {"correctness", true},
                        {"runtime_ms", 0.25},
                        {"ref_runtime_ms", 0.5},
                        {"metadata", {{"hardware", "NVIDIA H200"}}},
                        {"runtime_stats", {{"num_trials", 100}}},
                        {"strict", nullptr},
                        {"judge", {{"ok", true}}}};
  auto row = parse_reply<ResultRow>(kernelbench_row(verdict));
  ASSERT_TRUE(row.ok()) << row.status().message();
  ASSERT_TRUE(row->kernelbench.has_value());
  const KernelBenchVerdict& kb = *row->kernelbench;
  EXPECT_EQ(kb.verdict, "correct");
  EXPECT_EQ(kb.compiled, true);
  EXPECT_EQ(kb.runtime_ms, 0.25);
  EXPECT_EQ(kb.metadata->at("hardware"), "NVIDIA H200");
  ASSERT_TRUE(kb.strict.has_value()) << "a null the harness wrote is kept as null";
  EXPECT_TRUE(kb.strict->is_null());
  ASSERT_TRUE(kb.task.has_value());
  EXPECT_EQ(kb.task->problem_id, 19);
  EXPECT_EQ(kb.task->sample_id, 3);
  EXPECT_FALSE(kb.baseline.has_value());
}

TEST(ProtocolReplies, KernelBenchVerdictKeepsKeysItDoesNotNameAndNullFigures) {
  const json verdict = {{"mode", "baseline"},
                        {"harness_version", 1},
                        {"runtime_ms", nullptr},
                        {"baseline",
                         {{"ok", true},
                          {"mean_ms", 1.5},
                          {"stats", {{"num_trials", 100}}},
                          {"phases_s", {{"start", 2.5}, {"timed", 0.5}}},
                          {"gpu_lock", {{"waits", 2}}}}}};
  const json row = kernelbench_row(verdict);
  auto back = parse_reply<ResultRow>(row);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(json(*back).dump(), row.dump());
  const KernelBenchVerdict& kb = *back->kernelbench;
  EXPECT_FALSE(kb.runtime_ms.has_value()) << "null is not a figure";
  EXPECT_EQ(kb.other.at("harness_version"), 1);
  ASSERT_TRUE(kb.baseline.has_value());
  EXPECT_EQ(kb.baseline->mean_ms, 1.5);
  EXPECT_EQ(kb.baseline->phases_s->at("start"), 2.5);
  EXPECT_EQ(kb.baseline->other.at("gpu_lock").at("waits"), 2);
}

TEST(ProtocolReplies, AMistypedKernelBenchFieldIsAnErrorNamingIt) {
  auto r = parse_kernelbench_verdict(json{{"verdict", "correct"}, {"runtime_ms", "fast"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("runtime_ms"), std::string::npos) << r.status().message();
  auto nested = parse_kernelbench_verdict(json{{"baseline", {{"phases_s", {{"start", "soon"}}}}}});
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("baseline: phases_s"), std::string::npos) << nested.status().message();
}

TEST(ProtocolReplies, AMissingFieldIsAnErrorNamingItNotAnException) {
  json body = sample_status();
  body["campaigns"][0].erase("finished");
  Result<StatusReply> r = Status::internal("not run");
  ASSERT_NO_THROW(r = parse_reply<StatusReply>(body));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("StatusReply"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("campaigns: finished: missing"), std::string::npos) << r.status().message();
}

TEST(ProtocolReplies, AMistypedFieldIsAnErrorNamingItNotAnException) {
  Result<SubmitReply> r = Status::internal("not run");
  ASSERT_NO_THROW(r = parse_reply<SubmitReply>(json{{"campaign_id", "c-1"}, {"jobs", "24"}, {"name", "x"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("jobs: expected an integer, got string"), std::string::npos)
      << r.status().message();
  Result<CancelReply> fractional =
      parse_reply<CancelReply>(json{{"campaign_id", "c-1"}, {"cancelled", 1.5}, {"stopping", 0}, {"finished", 0}});
  EXPECT_FALSE(fractional.ok()) << "a count is an integer";
}

TEST(ProtocolReplies, ABodyThatIsNoObjectIsAnError) {
  for (const json& body : {json(nullptr), json::array(), json("rows")}) {
    Result<ResultsReply> r = Status::internal("not run");
    ASSERT_NO_THROW(r = parse_reply<ResultsReply>(body)) << body.dump();
    EXPECT_FALSE(r.ok()) << body.dump();
  }
}

TEST(ProtocolReplies, AResultRowWithAMistypedFigureIsAnError) {
  ResultRecord passed = ak::testing::sample_result();
  passed.status = ResultStatus::kPass;
  json row = result_row(ak::testing::sample_job(), passed, 1);
  row["latency_us"] = "12";
  auto r = parse_reply<ResultsReply>(json{{"rows", {row}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("latency_us"), std::string::npos) << r.status().message();
}

TEST(ProtocolReplies, TheReadyLineRoundTrips) {
  const CoordinatorReadyLine back =
      reply_round_trip(CoordinatorReadyLine{"tcp://127.0.0.1:5555", "tcp://127.0.0.1:5556", 9464, "redis://x", 42});
  EXPECT_EQ(back.clients, "tcp://127.0.0.1:5556");
  EXPECT_EQ(back.metrics_port, 9464);
}

// A verify report as models/verify_model.py writes it (with the worker's kernels_skipped) decodes
// into its typed parts: the time's "protocol" text is no timing, a decode without `forced` has none;
// a mistyped part is an error naming it, and a report of a step that failed early is mostly empty.
TEST(ProtocolReplies, AModelVerifyReportDecodesOnceIntoItsTypedParts) {
  const json doc = {
      {"model", "examples/gpt2:tiny"},
      {"device", "cuda"},
      {"gpu", "NVIDIA H100 80GB HBM3"},
      {"dtype", "bf16"},
      {"outputs", {{"original_error", 0.02}, {"tuned_error", 0.019}, {"limit", 0.05}, {"pass", true}}},
      {"decode",
       {{"tokens", 32},
        {"identical", false},
        {"first_difference", 13},
        {"margin_at_difference", 0.03},
        {"forced",
         {{"agree", 30},
          {"ties", 0},
          {"near_ties", 2},
          {"tolerance", 0.07},
          {"largest_gap", 0.01},
          {"first_difference", nullptr},
          {"identical_but_ties", true}}}}},
      {"time",
       {{"eager", {{"median_us", 100.0}, {"p10_us", 99.0}, {"p90_us", 101.0}}},
        {"tuned", {{"median_us", 80.0}, {"p10_us", 79.0}, {"p90_us", 81.0}}},
        {"protocol", "3 warm-up rounds, then 10 rounds"}}},
      {"graph_time", {{"eager", {{"median_us", 90.0}}}, {"tuned", {{"median_us", 75.0}}}, {"speedup", 1.2}}},
      {"speedup_vs_eager", 1.25},
      {"predicted_speedup", 1.3},
      {"replaced",
       {{{"function", "F.linear"},
         {"kernel_type", "matmul"},
         {"shape", {64, 64, 64}},
         {"dtype", "bf16"},
         {"calls_per_forward", 4}}}},
      {"fallbacks", {{{"function", "F.softmax"}, {"reason", "no tuned kernel"}, {"calls_per_forward", 2}}}},
      {"kernels_skipped", {{{"entry", 0}, {"kernel_type", "softmax"}, {"shape", {4, 4}}, {"reason", "slower"}}}}};
  auto r = parse_model_verify(doc);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gpu.value_or(""), "NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(r->outputs);
  EXPECT_TRUE(r->outputs->pass);
  EXPECT_DOUBLE_EQ(r->outputs->limit, 0.05);
  ASSERT_TRUE(r->decode && r->decode->forced);
  EXPECT_EQ(r->decode->first_difference.value_or(-1), 13);
  EXPECT_EQ(r->decode->forced->near_ties, 2);
  EXPECT_FALSE(r->decode->forced->first_difference);
  EXPECT_EQ(r->time.size(), 2u) << "the protocol text is not a timing";
  EXPECT_DOUBLE_EQ(r->time.at("tuned").median_us, 80.0);
  EXPECT_DOUBLE_EQ(r->graph_tuned->median_us, 75.0);
  EXPECT_DOUBLE_EQ(r->graph_speedup.value_or(0), 1.2);
  EXPECT_FALSE(r->speedup_vs_compile);
  ASSERT_EQ(r->replaced.size(), 1u);
  EXPECT_EQ(r->replaced[0].shape, (std::vector<int64_t>{64, 64, 64}));
  EXPECT_EQ(r->replaced[0].calls_per_forward, 4);
  ASSERT_EQ(r->kernels_skipped.size(), 1u);
  EXPECT_EQ(r->kernels_skipped[0].reason, "slower");
  EXPECT_EQ(r->raw, doc);

  json bad = doc;
  bad["outputs"]["pass"] = "yes";
  auto b = parse_model_verify(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("pass"), std::string::npos) << b.status().message();
  auto early = parse_model_verify(json{{"model", "m"}, {"error", "the model raised on import"}});
  ASSERT_TRUE(early.ok()) << early.status().message();
  EXPECT_FALSE(early->outputs);
  EXPECT_TRUE(early->replaced.empty());
  EXPECT_FALSE(parse_model_verify(json::array()).ok());
}

}  // namespace
}  // namespace ak::protocol
