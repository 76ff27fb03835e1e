// The tuning database on a real farm (redis-server, coordinator and CPU worker processes): a study
// campaign fills it, it survives a coordinator restart, `autokernel best --export` writes it,
// kernels/tuned.h's lookup loads the export, and `autokernel best --import` merges it into a second
// farm.
#include <cstdio>

#include "common/tuning.h"
#include "kernels/tuned.h"
#include "tests/integration/data/study_space.h"
#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

using nlohmann::json;
using Config = std::map<std::string, int64_t>;

const std::vector<int64_t> kSmall = {8, 64}, kLarge = {32, 256};

// A tpe study of the designed CPU space at two shapes, 10 trials each.
json two_shape_study() {
  json doc = designed_study("tuning", "tpe", 3, 10,
                            read_text(std::string(AK_SOURCE_DIR) + "/tests/integration/data/study_space_cpu.cc"));
  doc["targets"] = {{{"kernel_type", "softmax"}, {"shape", kSmall}, {"dtype", "fp32"}},
                    {{"kernel_type", "softmax"}, {"shape", kLarge}, {"dtype", "fp32"}}};
  doc["timeout_ms"] = 60000;
  doc["measure"] = {{"warmup", 1}, {"min_samples", 5}, {"max_samples", 20}, {"max_time_ms", 50}};
  return doc;
}

// The fastest PASS row per shape of campaign cid, from the store.
std::map<std::vector<int64_t>, std::pair<double, Config>> best_rows(const StoreSnapshot& snap, const std::string& cid) {
  std::map<std::string, const JobRecord*> jobs;
  for (const auto& j : snap.jobs)
    if (j.spec.campaign_id == cid) jobs[j.spec.job_id] = &j;
  std::map<std::vector<int64_t>, std::pair<double, Config>> best;
  for (const auto& r : snap.results) {
    auto it = jobs.find(r.job_id);
    if (it == jobs.end() || r.status != ResultStatus::kPass) continue;
    auto& b = best.try_emplace(it->second->spec.shape, 1e300, Config{}).first->second;
    if (r.m.latency_us < b.first) b = {r.m.latency_us, it->second->spec.config};
  }
  return best;
}

TEST(TuningFarmTest, AStudyFillsTheDatabaseWhichExportsLoadsInTheLookupAndImportsIntoAnotherFarm) {
  Farm farm;
  farm.start_coordinator();
  for (int i = 0; i < 2; ++i) farm.start_worker("b" + std::to_string(i), 1);
  farm.wait_workers(2);
  const std::string cid = farm.submit(two_shape_study());
  farm.wait_campaign(cid, std::chrono::seconds(900));
  const auto rows = best_rows(farm.snapshot(), cid);
  ASSERT_EQ(rows.size(), 2u);

  // The database holds, per shape, the fastest passing row with its provenance.
  auto best = farm.client().best(TuningQuery{"softmax", "cpu", "CPU", "fp32", ""});
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  auto entries = parse_tuning_export(json(*best));
  ASSERT_TRUE(entries.ok()) << entries.status().to_string();
  ASSERT_EQ(entries->size(), 2u);
  for (const TunedEntry& e : *entries) {
    const auto& [us, config] = rows.at(e.shape);
    EXPECT_EQ(e.config, config) << shape_string(e.shape);
    EXPECT_DOUBLE_EQ(e.m.latency_us, us) << shape_string(e.shape);
    EXPECT_EQ(e.campaign_id, cid);
    EXPECT_EQ(e.job_id.rfind(cid, 0), 0u) << e.job_id;
    EXPECT_TRUE(e.worker_id == "b0" || e.worker_id == "b1") << e.worker_id;
    EXPECT_EQ(e.versions.count("torch"), 1u) << "the worker's torch version is part of the provenance";
    EXPECT_FALSE(e.source.empty());
    EXPECT_FALSE(e.date.empty());
    std::printf("best %s: %s %.1f us (%s on %s, %s)\n", shape_string(e.shape).c_str(), config_string(e.config).c_str(),
                e.m.latency_us, e.job_id.c_str(), e.worker_id.c_str(), e.date.c_str());
  }

  // A restarted coordinator serves the same database from Redis.
  farm.kill_coordinator();
  farm.start_coordinator();
  auto again = farm.client().best(TuningQuery{});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(json(again->entries), json(best->entries));

  // `autokernel best --export`, loaded by the header-only lookup of kernels/tuned.h.
  const std::string file = farm.dir() + "/tuning.json";
  ASSERT_EQ(run_autokernel({"best", "--client", farm.client_endpoint(), "--export", file}), 0);
  auto tuned = kernels::TunedConfigs::load(file);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_EQ(tuned->size(), 2u);
  auto exact = tuned->find("softmax", "cpu", "fp32", kLarge, "cpu");
  ASSERT_TRUE(exact.has_value());
  EXPECT_TRUE(exact->exact);
  EXPECT_EQ(exact->config, rows.at(kLarge).second);
  auto near = tuned->find("softmax", "cpu", "fp32", {16, 80}, "cpu");  // nearer [8, 64] in log2
  ASSERT_TRUE(near.has_value());
  EXPECT_FALSE(near->exact);
  EXPECT_EQ(near->shape, kSmall);
  EXPECT_EQ(near->config, rows.at(kSmall).second);
  EXPECT_FALSE(tuned->find("softmax", "cpu", "bf16", kSmall).has_value()) << "nothing tuned in bf16";
  EXPECT_FALSE(tuned->find("softmax", "cpu", "fp32", kSmall, "cuda").has_value()) << "nothing tuned on cuda";

  // Imported into a second farm: the same entries; importing again stores nothing.
  Farm other;
  other.start_coordinator();
  ASSERT_EQ(run_autokernel({"best", "--client", other.client_endpoint(), "--import", file}), 0);
  auto imported = other.client().best(TuningQuery{});
  ASSERT_TRUE(imported.ok());
  EXPECT_EQ(json(imported->entries), json(best->entries));
  auto twice = other.client().import_best(json::parse(read_text(file)));
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->stored, 0);
  EXPECT_EQ(twice->kept, 2);
  // A faster entry from elsewhere replaces one; a malformed file is refused with the reason.
  json doc = json::parse(read_text(file));
  doc["entries"][0]["latency_us"] = doc["entries"][0]["latency_us"].get<double>() / 2;
  doc["entries"][0]["provenance"]["job_id"] = "elsewhere-1";
  auto faster = other.client().import_best(doc);
  ASSERT_TRUE(faster.ok());
  EXPECT_EQ(faster->stored, 1);
  auto after = other.client().best(TuningQuery{});
  ASSERT_TRUE(after.ok());
  ASSERT_FALSE(after->entries.empty());
  EXPECT_EQ(after->entries[0].job_id, "elsewhere-1");
  auto bad = other.client().import_best(json{{"format", 2}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("format"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace ak::testing
