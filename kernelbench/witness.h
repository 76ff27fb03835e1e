// The witness step's result, as the worker reads it (kernelbench/HARNESS.md, "witness"): a process
// that never loads candidate code times the candidate from outside its process, on inputs the
// candidate has not seen, and checks every output it timed. Its result file is
// {"body": "<JSON text>", "mac": "<hex HMAC-SHA256 of body under the step's key>"}; the key is made
// here for one step and reaches the witness alone, so a candidate that writes the file cannot
// forge it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace ak::kernelbench {

// The environment variable that hands the key to the witness (it removes it at once).
inline constexpr const char* kWitnessKeyEnv = "AK_WITNESS_KEY";

// The timing rule. The witness measures, per call, the candidate runner's wall time and the
// reference runner's, and the reference by KernelBench's timer in its own process. Both runners pay
// the same hand-over (pipe, synchronisation, copies), so the candidate's fastest witnessed round
// less the reference runner's, plus the reference's fastest call (by KernelBench's timer, or among
// the witness's own reference calls in the rounds, ref_call_min_ms), estimates the candidate's
// time by the faithful timer at best (estimate_ms; the fastest rounds, since a loaded host only ever
// adds time and no runner can make a round shorter than its work). The candidate's own figure is
// forged when kWitnessRatio times it plus the slack is still below that estimate. The slack is
// kWitnessSlackMs or, on a host loaded meanwhile, the spread of the reference runner's rounds
// (their median less their best, reference_ms - reference_min_ms), whichever is larger: it covers
// wall-clock noise and a host whose load changes between the reference runner's rounds and the
// candidate's, which run one after the other, and no candidate can widen it (the reference
// runner's rounds end before candidate code runs). Whatever the rule says, a witnessed job's time
// is its own figure or the estimate less kWitnessSlackMs, whichever is longer: a claim below that
// never counts, and the spread never lowers that floor (on a noisy host an honest figure may be
// counted too long; no figure is counted too short). (A CPU farm test on a loaded 2-core host once
// saw the reference runner's rounds spread from 9.2 to 16.6 ms a call and an honest 0.13 ms
// candidate estimated at 6.3 ms: it passes, counted at 6.29 ms.) (On the H100 an honest 11 us matmul
// was estimated at 46 us with 8 calls a round: below tens of microseconds a call the witness cannot tell, and does not
// pretend to.)
inline constexpr double kWitnessRatio = 10.0;
inline constexpr double kWitnessSlackMs = 0.05;

// 32 random bytes as 64 hex digits, from the kernel's random source.
Result<std::string> new_witness_key();

// HMAC-SHA256(key, text) as 64 lowercase hex digits; key is hex.
Result<std::string> hmac_sha256_hex(const std::string& key_hex, const std::string& text);

// The body of a witness result file, parsed, when its MAC is the one `key_hex` gives; otherwise
// kInvalidArgument saying what is wrong (no body, no MAC, a MAC that does not match).
Result<nlohmann::json> authentic_witness(const nlohmann::json& file, const std::string& key_hex);

struct WitnessJudgement {
  // kReferenceFailed: the reference runner failed or disagreed with the witness before any
  // candidate code ran (out of memory, a reference that does not reproduce in another process):
  // the candidate is not at fault, and its own figures are not taken either (the job ends CRASH).
  enum class Kind { kPass, kFail, kNotWitnessed, kReferenceFailed };
  Kind kind = Kind::kFail;
  std::string reason;     // why it failed, or why nothing could be witnessed
  double counted_ms = 0;  // kPass: max(runtime_ms, estimate - kWitnessSlackMs), what a speedup divides
  double slack_ms = 0;    // kPass and a forged figure: the slack the rule's test allowed
  double ref_ms = -1;     // kPass: the reference by KernelBench's timer in the witness (-1: none)
  // kFail by the timing rule alone (outputs right, runners fine): a load on the host that fell on
  // the candidate's rounds only can look the same, so the worker witnesses once more before it
  // fails the job (worker/kernelbench_runner.cc).
  bool by_timing = false;
};

// The rule applied to an authentic body and the candidate's own runtime_ms: outputs that differ on
// unseen inputs, a runner that failed, or a figure the timing rule above calls forged fail; a
// problem whose inputs or outputs cannot be handed over ("reason" set, nothing else wrong) is not
// witnessed.
WitnessJudgement judge_witness(const nlohmann::json& body, double runtime_ms);

}  // namespace ak::kernelbench
