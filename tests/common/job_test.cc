#include "common/job.h"

#include <gtest/gtest.h>

#include "tests/common/records.h"

namespace ak {
namespace {

using nlohmann::json;
using testing::as_json;

TEST(JobEnums, EveryBackendNameParsesBackToItsValue) {
  for (Backend b : {Backend::kCpu, Backend::kCuda}) EXPECT_EQ(parse_backend(backend_name(b)), b);
  EXPECT_STREQ(backend_name(Backend::kCuda), "cuda");
}

TEST(JobEnums, EveryDTypeNameParsesBackToItsValue) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_STREQ(dtype_name(DType::kBF16), "bf16");
}

TEST(JobEnums, EveryJobStateNameParsesBackToItsValue) {
  for (JobState s : {JobState::kQueued, JobState::kLeased, JobState::kDone, JobState::kLost})
    EXPECT_EQ(parse_job_state(job_state_name(s)), s);
}

TEST(JobEnums, EveryResultStatusNameParsesBackToItsValue) {
  for (int i = 0; i <= static_cast<int>(ResultStatus::kCancelled); ++i) {
    auto s = static_cast<ResultStatus>(i);
    EXPECT_EQ(parse_result_status(result_status_name(s)), s);
  }
  EXPECT_STREQ(result_status_name(ResultStatus::kCompileError), "COMPILE_ERROR");
}

TEST(JobEnums, UnknownNamesParseToNothing) {
  EXPECT_FALSE(parse_backend("rocm"));
  EXPECT_FALSE(parse_dtype("fp8"));
  EXPECT_FALSE(parse_job_state("queued"));  // names are case-sensitive
  EXPECT_FALSE(parse_result_status(""));
}

TEST(JobEnums, DTypeBytesAreTheElementSizes) {
  EXPECT_EQ(dtype_bytes(DType::kF32), 4);
  EXPECT_EQ(dtype_bytes(DType::kF16), 2);
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
}

TEST(JobSpecJson, RoundTripKeepsEveryField) {
  const JobSpec s = testing::sample_spec();
  const JobSpec back = json(s).get<JobSpec>();
  EXPECT_EQ(back.job_id, s.job_id);
  EXPECT_EQ(back.campaign_id, s.campaign_id);
  EXPECT_EQ(back.kernel_type, s.kernel_type);
  EXPECT_EQ(back.source, s.source);
  EXPECT_EQ(back.config, s.config);
  EXPECT_EQ(back.shape, s.shape);
  EXPECT_EQ(back.dtype, s.dtype);
  EXPECT_EQ(back.requires_.backend, s.requires_.backend);
  EXPECT_EQ(back.requires_.gpu_model, s.requires_.gpu_model);
  EXPECT_EQ(back.requires_.arch, s.requires_.arch);
  EXPECT_EQ(back.timeout_ms, s.timeout_ms);
  EXPECT_EQ(back.measure.warmup, s.measure.warmup);
  EXPECT_EQ(back.measure.min_samples, s.measure.min_samples);
  EXPECT_EQ(back.measure.max_samples, s.measure.max_samples);
  EXPECT_EQ(back.measure.max_time_ms, s.measure.max_time_ms);
  EXPECT_EQ(back.measure.noise_target, s.measure.noise_target);
  EXPECT_EQ(back.measure.cold, s.measure.cold);
  EXPECT_EQ(back.tag, s.tag);
  EXPECT_EQ(back.description, s.description);
}

TEST(JobSpecJson, RequirementsAreWrittenUnderTheKeyRequires) {
  const json j = testing::sample_spec();
  ASSERT_TRUE(j.contains("requires"));
  EXPECT_EQ(j["requires"]["backend"], "cuda");
  EXPECT_EQ(j["dtype"], "bf16");
}

TEST(JobSpecJson, OptionalFieldsTakeTheirDocumentedDefaults) {
  const json j = {{"job_id", "j"}, {"kernel_type", "softmax"}, {"source", ""}, {"shape", {8, 8}},
                  {"dtype", "fp32"}, {"requires", {{"backend", "cpu"}}}};
  const JobSpec s = j.get<JobSpec>();
  EXPECT_EQ(s.timeout_ms, 60'000);
  EXPECT_EQ(s.measure.min_samples, MeasureOptions{}.min_samples);
  EXPECT_TRUE(s.config.empty());
  EXPECT_EQ(s.requires_.gpu_model, "");
}

TEST(JobSpecJson, AnUnknownDTypeThrowsAJsonException) {
  json j = testing::sample_spec();
  j["dtype"] = "fp8";
  EXPECT_THROW(j.get<JobSpec>(), json::exception);
}

TEST(JobSpecJson, AMissingRequiredFieldThrowsAJsonException) {
  json j = testing::sample_spec();
  j.erase("kernel_type");
  EXPECT_THROW(j.get<JobSpec>(), json::exception);
}

TEST(CapabilitiesJson, RoundTripKeepsEveryField) {
  const Capabilities c = testing::sample_caps();
  const Capabilities back = json(c).get<Capabilities>();
  EXPECT_EQ(as_json(back), as_json(c));
  EXPECT_EQ(back.memory_bytes, 150'000'000'000);
  EXPECT_EQ(back.backends, c.backends);
}

TEST(CapabilitiesJson, TheSharedMemoryLimitRoundTripsAndReadsAsUnknownWhereAWorkerOmitsIt) {
  Capabilities c = testing::sample_caps();
  c.shared_memory_per_block_bytes = 227 * 1024;
  json j = c;
  EXPECT_EQ(j.get<Capabilities>().shared_memory_per_block_bytes, 227 * 1024);
  j.erase("shared_memory_per_block_bytes");  // a worker from before the field
  EXPECT_EQ(j.get<Capabilities>().shared_memory_per_block_bytes, 0);
  c.shared_memory_per_block_bytes = 0;
  EXPECT_FALSE(json(c).contains("shared_memory_per_block_bytes")) << "unknown is not announced";
}

TEST(MeasurementJson, RoundTripKeepsEveryFieldExactly) {
  const Measurement m = testing::sample_measurement();
  const Measurement back = json(m).get<Measurement>();
  EXPECT_EQ(as_json(back), as_json(m));
  EXPECT_DOUBLE_EQ(back.max_abs_error, m.max_abs_error);
  EXPECT_EQ(back.samples, 117);
  EXPECT_EQ(json(m).size(), 38u) << "a Measurement field was added; extend sample_measurement";
}

TEST(ResultRecordJson, RoundTripKeepsEveryField) {
  const ResultRecord r = testing::sample_result();
  const ResultRecord back = json(r).get<ResultRecord>();
  EXPECT_EQ(as_json(back), as_json(r));
  EXPECT_EQ(back.status, ResultStatus::kTimeout);
  EXPECT_EQ(back.attempt_reasons.size(), 2u);
  EXPECT_EQ(back.m.latency_us, 10.5);
}

TEST(ResultRecordJson, AMissingJobIdThrowsAJsonException) {
  json j = testing::sample_result();
  j.erase("job_id");
  EXPECT_THROW(j.get<ResultRecord>(), json::exception);
}

TEST(JobRecordJson, RoundTripKeepsEveryField) {
  const JobRecord r = testing::sample_job();
  const JobRecord back = json(r).get<JobRecord>();
  EXPECT_EQ(as_json(back), as_json(r));
  EXPECT_EQ(back.state, JobState::kLeased);
  EXPECT_EQ(back.lease_expires_ms, 1'234'567);
  EXPECT_EQ(back.orphaned_wall_ms, 1'700'000'000'456);
}

TEST(CampaignRecordJson, RoundTripKeepsEveryFieldIncludingTheDefinition) {
  const CampaignRecord c = testing::sample_campaign();
  const CampaignRecord back = json(c).get<CampaignRecord>();
  EXPECT_EQ(as_json(back), as_json(c));
  EXPECT_EQ(back.definition["shapes"][1][1], 128);
  EXPECT_FALSE(json(c).contains("cancelled"));
  EXPECT_FALSE(json(c).contains("owner")) << "a campaign submitted without CURVE has no owner";
  CampaignRecord owned = c;
  owned.owner = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  EXPECT_EQ(json(owned).get<CampaignRecord>().owner, owned.owner);
  CampaignRecord cancelled = c;
  cancelled.cancelled = true;
  cancelled.cancel_reason = "superseded";
  const CampaignRecord back2 = json(cancelled).get<CampaignRecord>();
  EXPECT_TRUE(back2.cancelled);
  EXPECT_EQ(back2.cancel_reason, "superseded");
}

TEST(JobStrings, ShapeStringJoinsDimensionsWithX) {
  EXPECT_EQ(shape_string({1024, 4096}), "1024x4096");
  EXPECT_EQ(shape_string({7}), "7");
  EXPECT_EQ(shape_string({}), "");
}

TEST(JobStrings, ConfigStringListsTunablesSortedByName) {
  EXPECT_EQ(config_string({{"VEC", 4}, {"BLOCK", 256}}), "BLOCK=256,VEC=4");
  EXPECT_EQ(config_string({}), "");
}

}  // namespace
}  // namespace ak
