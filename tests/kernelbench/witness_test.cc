// The worker's side of the witness (kernelbench/witness.h): the signature the harness's Python
// makes is the one checked here, a result a candidate could have written is refused, and the rule
// that turns the witness's figures into a verdict.
#include "kernelbench/witness.h"

#include <set>

#include <gtest/gtest.h>

namespace ak::kernelbench {
namespace {

using nlohmann::json;

const std::string kKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

TEST(Witness, TheSignatureIsPythonsHmacSha256OfTheBodysText) {
  // hmac.new(bytes(range(32)), b'{"witnessed": true}', hashlib.sha256).hexdigest()
  auto mac = hmac_sha256_hex(kKey, R"({"witnessed": true})");
  ASSERT_TRUE(mac.ok()) << mac.status().message();
  EXPECT_EQ(*mac, "673900a75bbb78da280b1dc113e615ce66f9e053909d023f76d89c8dd3e8be03");
  EXPECT_FALSE(hmac_sha256_hex("00ff", "x").ok());
  EXPECT_FALSE(hmac_sha256_hex(std::string(64, 'g'), "x").ok());
}

TEST(Witness, KeysAreFreshSixtyFourHexDigits) {
  std::set<std::string> seen;
  for (int i = 0; i < 16; ++i) {
    auto k = new_witness_key();
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(k->size(), 64u);
    EXPECT_EQ(k->find_first_not_of("0123456789abcdef"), std::string::npos) << *k;
    seen.insert(*k);
  }
  EXPECT_EQ(seen.size(), 16u);
}

TEST(Witness, OnlyABodySignedWithTheStepsKeyIsTakenAndNothingElseOfTheFileCounts) {
  const std::string body = R"({"witnessed": true, "estimate_ms": 1.5})";
  const json file = {{"body", body}, {"mac", *hmac_sha256_hex(kKey, body)}, {"estimate_ms", 0.001}};
  auto doc = authentic_witness(file, kKey);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ((*doc)["estimate_ms"], 1.5);  // the body's, not the unsigned field beside it

  json altered = file;
  altered["body"] = R"({"witnessed": true, "estimate_ms": 0.001})";
  EXPECT_NE(authentic_witness(altered, kKey).status().message().find("forged or altered"), std::string::npos);
  auto other = new_witness_key();
  EXPECT_FALSE(authentic_witness(file, *other).ok());
  EXPECT_NE(authentic_witness(json{{"body", body}, {"mac", nullptr}}, kKey).status().message().find("not signed"),
            std::string::npos);
  EXPECT_FALSE(authentic_witness(json{{"mac", "00"}}, kKey).ok());
  EXPECT_FALSE(authentic_witness(json::array(), kKey).ok());
  const std::string not_an_object = "[1]";
  EXPECT_FALSE(
      authentic_witness(json{{"body", not_an_object}, {"mac", *hmac_sha256_hex(kKey, not_an_object)}}, kKey).ok());
}

TEST(Witness, TheRuleFailsWrongOutputsAFailedRunnerAndAnOwnFigureTheWitnessedTimeBelies) {
  using Kind = WitnessJudgement::Kind;
  // Witnessed at best: the candidate 10.2 ms a call, the reference runner 5.2 ms; the reference by
  // CUDA events 5.0 ms at best: an estimate of 10.0 ms. The medians do not enter the rule.
  const json ok = {{"witnessed", true},
                   {"candidate_min_ms", 10.2},
                   {"reference_min_ms", 5.2},
                   {"candidate_ms", 99.0},
                   {"reference_ms", 1.0},
                   {"ref_runtime_ms", 5.5},
                   {"ref_runtime_stats", {{"min", 5.0}, {"mean", 5.5}}},
                   {"mismatch", nullptr},
                   {"runner_error", nullptr}};
  EXPECT_EQ(judge_witness(ok, 10.5).kind, Kind::kPass);
  EXPECT_DOUBLE_EQ(judge_witness(ok, 10.5).counted_ms, 10.5);
  EXPECT_EQ(judge_witness(ok, 50.0).kind, Kind::kPass);  // slower than witnessed: only its loss
  // Noise: a third of the estimate, less the slack, still passes; but it is not what counts.
  const auto low = judge_witness(ok, (10.0 - kWitnessSlackMs) / kWitnessRatio + 0.001);
  EXPECT_EQ(low.kind, Kind::kPass);
  EXPECT_NEAR(low.counted_ms, 10.0 - kWitnessSlackMs, 1e-9);
  // Within the slack of the estimate, the own figure counts.
  EXPECT_DOUBLE_EQ(judge_witness(ok, 10.0 - kWitnessSlackMs / 2).counted_ms, 10.0 - kWitnessSlackMs / 2);
  const auto forged = judge_witness(ok, 0.01);
  EXPECT_EQ(forged.kind, Kind::kFail);
  EXPECT_NE(forged.reason.find("own timing (0.01 ms) is far below what the witness measured from outside its "
                               "process: at best 10.2 ms a call, against 5.2 ms for the reference runner whose "
                               "reference takes 5 ms, an estimate of 10 ms"),
            std::string::npos)
      << forged.reason;
  EXPECT_EQ(judge_witness(ok, 0.9).kind, Kind::kFail);   // an 11x claim over the truth
  EXPECT_EQ(judge_witness(ok, -1.0).kind, Kind::kFail);  // not timed at all

  json wrong = ok;
  wrong["witnessed"] = false;
  wrong["mismatch"] = "candidate: round 0 call 0 output 0 differs";
  EXPECT_EQ(judge_witness(wrong, 10.0).kind, Kind::kFail);
  EXPECT_NE(judge_witness(wrong, 10.0).reason.find("had not seen"), std::string::npos);
  json ref_failed = ok;  // the reference runner's failure: neither a pass nor the candidate's fail
  ref_failed["witnessed"] = false;
  ref_failed["reference_error"] = "reference: round 0 call 0 output 0 differs";
  EXPECT_EQ(judge_witness(ref_failed, 10.5).kind, Kind::kReferenceFailed);
  EXPECT_NE(judge_witness(ref_failed, 10.5).reason.find("before any candidate code ran"), std::string::npos);
  json odd = ok;  // a mismatch of another type still says something differed
  odd["mismatch"] = 1;
  EXPECT_EQ(judge_witness(odd, 10.5).kind, Kind::kFail);
  EXPECT_DOUBLE_EQ(judge_witness(ok, 10.5).ref_ms, 5.5);
  json died = ok;
  died["witnessed"] = false;
  died["runner_error"] = "candidate: the runner ended (exit code 9)";
  EXPECT_EQ(judge_witness(died, 10.0).kind, Kind::kFail);
  json shapes = {{"witnessed", false}, {"reason", "get_inputs() gives inputs of other shapes"}};
  EXPECT_EQ(judge_witness(shapes, 10.0).kind, Kind::kNotWitnessed);
  EXPECT_EQ(judge_witness(shapes, 10.0).reason, "get_inputs() gives inputs of other shapes");
  // The reference's timing before the rounds was slowed by the host (8 ms for a 5 ms reference):
  // its calls in the rounds, 5 ms at best, are what the estimate takes.
  json loaded = ok;
  loaded["ref_runtime_stats"]["min"] = 8.0;
  loaded["ref_call_min_ms"] = 5.0;
  EXPECT_EQ(judge_witness(loaded, 1.0).kind, Kind::kPass);
  json slowed = loaded;  // without the calls in the rounds, the slowed timing would fail it
  slowed.erase("ref_call_min_ms");
  EXPECT_EQ(judge_witness(slowed, 1.0).kind, Kind::kFail);
  EXPECT_NEAR(judge_witness(loaded, 1.0).counted_ms, 10.0 - kWitnessSlackMs, 1e-9);
  // A host loaded while the witness ran (seen in CI on 2 cores): the reference runner's rounds went
  // from 9.24 ms a call at best to 16.59 at the median, and the candidate's best round (15.43) was
  // never as lucky as the reference runner's. The honest 0.134 ms candidate is estimated at 6.34 ms,
  // within the spread; the clock-forging one, 20 ms a call claimed as 0.02, is not.
  const json noisy = {{"witnessed", true},
                      {"candidate_min_ms", 15.43},
                      {"reference_min_ms", 9.24},
                      {"candidate_ms", 16.45},
                      {"reference_ms", 16.59},
                      {"ref_call_min_ms", 0.156},
                      {"ref_runtime_stats", {{"min", 4.0}}}};
  EXPECT_EQ(judge_witness(noisy, 0.134).kind, Kind::kPass);
  // The spread widens the test, not the floor: counted at the estimate less 0.05 ms, too long
  // rather than too short; and a tiny claim that the wide test lets through gains nothing.
  EXPECT_NEAR(judge_witness(noisy, 0.134).counted_ms, 6.34 - kWitnessSlackMs, 0.01);
  EXPECT_EQ(judge_witness(noisy, 0.001).kind, Kind::kPass);
  EXPECT_NEAR(judge_witness(noisy, 0.001).counted_ms, 6.34 - kWitnessSlackMs, 0.01);
  EXPECT_NEAR(judge_witness(noisy, 0.134).slack_ms, 16.59 - 9.24, 1e-9);
  EXPECT_DOUBLE_EQ(judge_witness(ok, 10.5).slack_ms, kWitnessSlackMs);
  json noisy_forged = noisy;
  noisy_forged["candidate_min_ms"] = 9.24 + 20.0;
  noisy_forged["candidate_ms"] = 16.59 + 20.0;
  const auto caught = judge_witness(noisy_forged, 0.02);
  EXPECT_EQ(caught.kind, Kind::kFail);
  EXPECT_NE(caught.reason.find("(slack 7.35 ms)"), std::string::npos) << caught.reason;
  json no_figures = {{"witnessed", true}, {"candidate_min_ms", 1.0}, {"reference_min_ms", 1.0}};
  EXPECT_EQ(judge_witness(no_figures, 10.0).kind, Kind::kFail);
}

}  // namespace
}  // namespace ak::kernelbench
