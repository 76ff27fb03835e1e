// Allocation of a campaign's worker capacity across its studies, by Amdahl's law.
//
// A campaign tunes many targets (kernel type + shape + dtype on one GPU model), one study each.
// A target's worth to the user is its share of the workload's GPU time: a 10x kernel for an op
// that takes 1% of the time saves less than a 1.2x kernel for one that takes 50%. This module
// answers three questions from numbers the caller already holds (store records, the profile,
// the roofline model):
//   amdahl_estimate()  the end-to-end speedup of the workload with the best kernels so far;
//   allocate()         how many of the free worker slots (proposals to make now) each study gets;
//   should_stop()      whether a study has finished (plateau, roofline, trial or wall budget).
//
// Like strategy.h, everything here is a pure function: no I/O, no clock reads (the caller passes
// now_ms from its injected ak::Clock), no state between calls, so a restarted coordinator that
// replays the same records allocates the same slots. All functions may be called from any thread.
//
// Speedups below 1. A kernel slower than the PyTorch op is still reported (speedup() returns the
// raw ratio), but users keep the PyTorch op in that case, so the end-to-end estimate and the gain
// model use effective_speedup() = max(speedup, 1).
//
// Gain model (expected_gain()). The fraction of the workload's time that target t could still
// save if it reached its roofline floor is
//     potential_t = f_t * (min(best_t, baseline_t) - roofline_t) / baseline_t      (>= 0)
// (best_t = baseline_t while no result exists). Moving a fixed fraction of the way toward the
// floor scales every target alike and cancels in the proportions, so it is left out. Studies that
// have stopped improving are worth less per trial: the potential is multiplied by
//     exp(-trials_since_improvement / staleness_tau_trials),
// so a plateauing study fades before its stop rule fires. Done targets and targets whose trial
// budget is used up (counting trials in flight) get 0. This is a heuristic, not a forecast: it
// ranks studies and sets proportions; its absolute value means nothing.
//
// Exploration. A target never attempted (trials == 0 and nothing in flight) gets one slot before
// any slot is shared by gain, so every target is measured once before capacity follows the
// numbers; when there are fewer free slots than such targets, larger shares go first (then lower
// index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/search/strategy.h"

namespace ak::search {

// One target of a campaign and the state of its study, as the coordinator knows it now.
// Times are in microseconds of kernel time; any one unit works as long as all three agree.
struct Target {
  std::string name;  // for messages only, e.g. "matmul 4096x4096x4096 fp16 H100"

  // f_t: fraction of the workload's GPU time spent in this op, in [0, 1]; the shares of a
  // campaign sum to at most 1 (the rest is time no target covers). Equal shares by default when
  // there is no profile (the caller's choice: 1 / number of targets).
  double share = 0.0;
  // The PyTorch op's time [us] (> 0).
  double baseline_us = 0.0;
  // Best verified time so far [us] (> 0); nullopt while no trial has succeeded.
  std::optional<double> best_us;
  // Roofline floor [us]: the fastest the hardware could do this op (>= 0; 0 = unknown, which makes
  // the whole of the remaining time count as potential).
  double roofline_us = 0.0;

  size_t trials = 0;          // finished trials, failed ones included
  size_t in_flight = 0;       // proposed but not yet measured
  size_t budget_trials = 0;   // most trials this study may run (finished + in flight)
  // Finished trials since the last improvement of at least the plateau threshold (1%); see
  // trials_since_improvement() to compute it from a history. Failed trials count.
  size_t trials_since_improvement = 0;
  int64_t started_ms = 0;     // when the study started, on the caller's monotonic clock [ms]
  bool done = false;          // the study has moved on (should_stop() said so, or the user did)
};

// baseline_us / best_us; 1.0 with no result; +infinity for best_us == 0. Values below 1 (a kernel
// slower than PyTorch) are returned as they are.
double speedup(const Target& t);

// max(speedup(t), 1): what the workload gains, since a slower kernel is not used.
double effective_speedup(const Target& t);

// 1 / (1 - sum_t f_t * (1 - 1/s_t)) with s_t = effective_speedup(t): the workload's end-to-end
// speedup. 1.0 for no targets. +infinity when the workload's remaining time would be zero (shares
// summing to 1, every one with an infinite speedup); never NaN for targets validate() accepts.
double amdahl_estimate(const std::vector<Target>& targets);

struct AllocationOptions {
  // Trials without improvement over which a study's gain falls by a factor e (> 0).
  double staleness_tau_trials = 8.0;
};

// kInvalidArgument, naming the target, when a share is outside [0, 1], the shares sum to more
// than 1 (beyond 1e-9 of rounding), a baseline is not a positive finite number, best_us is not
// positive and finite (when present), or a roofline is negative or not finite. trials + in_flight
// may exceed budget_trials (a lowered budget simply leaves nothing to allocate).
Status validate(const std::vector<Target>& targets);

// The gain model above for one target (0 for done or out-of-budget targets). Assumes validate()
// accepted it.
double expected_gain(const Target& t, const AllocationOptions& opts = {});

struct Allocation {
  std::vector<size_t> slots;  // per target, in the order given; sums to at most free_slots
  std::vector<double> gain;   // expected_gain() of each target, as used
  size_t unused_slots = 0;    // free slots no target could take (all done or out of budget)
};

// Shares free_slots among the targets: first one slot to each never-attempted target (see
// Exploration above), then the rest in proportion to expected_gain(), by largest-remainder
// rounding (quota floors first, then one more slot each in order of decreasing fractional part,
// ties to the lower index). No slot goes to a done target, and no target gets more than
// budget_trials - trials - in_flight; a target that reaches its cap gives the excess back to the
// others in proportion to their gains. A target with gain 0 that is not done gets only what the
// targets with positive gain cannot take, one slot each in index order, round after round: it
// must not stall its campaign, since its study goes on until a stop rule ends it. Slots nobody
// can take are counted in unused_slots. Errors: validate()'s, and kInvalidArgument for options out of range.
Result<Allocation> allocate(const std::vector<Target>& targets, size_t free_slots,
                            const AllocationOptions& opts = {});

// Why a study should stop. kNone = 0 means it should go on.
enum class StopReason {
  kNone = 0,
  kPlateau,     // trials_since_improvement >= plateau_window
  kRoofline,    // roofline_us / best_us >= roofline_fraction
  kBudget,      // trials >= budget_trials
  kWallTime,    // now_ms - started_ms >= wall_budget_ms
};

const char* stop_reason_name(StopReason r);

struct StopRule {
  // Stop after this many finished trials without a 1% improvement (0: never for this reason).
  size_t plateau_window = 20;
  // Stop once the best is within this fraction of the roofline floor, e.g. 0.9 = at least 90% of
  // the hardware's speed (0: never for this reason; ignored while roofline_us is 0).
  double roofline_fraction = 0.9;
  // Stop once the study has run this long [ms] (0: no wall-time budget).
  int64_t wall_budget_ms = 0;
};

// The first reason that holds, in the enum's order, or kNone. A done target keeps whatever reason
// holds (kNone if the user stopped it). now_ms comes from the caller's Clock.
StopReason stop_reason(const Target& t, const StopRule& rule, int64_t now_ms);
inline bool should_stop(const Target& t, const StopRule& rule, int64_t now_ms) {
  return stop_reason(t, rule, now_ms) != StopReason::kNone;
}

// Target::trials_since_improvement from a study's history (in history order): the number of
// trials after the last one whose value was at least min_rel_improvement (0.01 = 1%) below the
// best at the previous counted improvement (the first success counts). Small steps add up: five
// 0.3% steps count once they total 1%. history.size() when no trial ever succeeded. The same
// threshold as plateaued(); this count is what the gain's decay needs, plateaued() only a yes/no.
size_t trials_since_improvement(const std::vector<Trial>& history, double min_rel_improvement = 0.01);

}  // namespace ak::search
