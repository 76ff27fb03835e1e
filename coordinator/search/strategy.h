// Search strategies of a tuning study: which configurations of one kernel's discrete search space
// (kernels/registry.h, a list of Tunables) to measure next, given every trial so far.
//
// A strategy is a pure function of (space, seed, options, history): propose() does no I/O, reads
// no clock and keeps no state between calls, so a coordinator that restarts and replays the same
// history from the store gets the same proposals (resumability), and two calls with the same
// history return the same configurations. Its random numbers come from std::mt19937_64 seeded
// from the seed mixed with a hash of the history's configurations (not their values, so a value
// that went through a text round trip cannot change the stream). Integer and real draws are made
// from the engine's raw output, not with <random>'s distributions, whose results differ between
// standard libraries.
//
// Threads: a Strategy is immutable after make_strategy(); propose() may be called from several
// threads at once provided the feasibility predicate may be too.
//
// Strategies (make_strategy names, in order of sophistication):
//   exhaustive    every point in kernels::enumerate_space order (last tunable fastest), skipping
//                 seen and infeasible ones.
//   random        uniform over the unseen feasible points without replacement. Exact for spaces of
//                 at most StrategyOptions::exact_random_limit points; larger spaces draw a value
//                 per tunable and reject seen or infeasible draws, up to random_max_attempts in a
//                 row, so near exhaustion of a huge space it may return fewer than asked.
//   evolutionary  memetic: a steady-state genetic algorithm over the history (tournament selection
//                 among the best successful trials, uniform crossover per tunable, mutation to a
//                 neighbouring value in the tunable's list (ordinal neighbourhood) or, more rarely,
//                 to any value; a child already seen is mutated again) interleaved with a local
//                 search: each slot, with local_search_probability, is an unseen point one tunable
//                 away from one of the best local_search_elite trials, nearest values first. The
//                 elite of several, not the incumbent alone, keeps a neighbour of the true best in
//                 play when timing noise misorders the top few. Random until startup_trials
//                 results exist.
//   tpe           tree-structured Parzen estimator (Bergstra et al., "Algorithms for
//                 Hyper-Parameter Optimization", NeurIPS 2011) over the value indices: successful
//                 trials split into the best gamma fraction and the rest, one smoothed categorical
//                 density per tunable for each (a uniform prior plus neighbour smoothing), many
//                 candidates drawn from l(x) and the unseen one maximising l(x)/g(x) proposed.
//                 Random until startup_trials results exist.
// Measured on a 972-point matmul-like space (tests/coordinator/search_test.cc): evolutionary and
// tpe come within 3% of the best in well under 25% of the feasible evaluations; the test's comment
// has the figures (of the genetic algorithm before its local search; with it, over seeds 1..100:
// mean 34.2 evaluations either way, worst 102 instead of 121). On the farm test's designed space
// with farm-like timing noise (tests/coordinator/study_test.cc) it took the seeds that end off the
// best from 3 of 100 to none (12 of 300 to 1 over seeds 1..300).
//
// Ordinal neighbourhoods follow the order of each Tunable's value list (as written in the
// kernel's space, usually ascending), not the numeric order of the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/registry.h"

namespace ak::search {

// One point of a search space: tunable name -> value (what becomes -D<name>=<value>).
using Config = std::map<std::string, int64_t>;

// One measured (or attempted) configuration of a study.
struct Trial {
  Config config;
  // Latency [ms] (any unit works; lower is better). nullopt: no usable measurement (COMPILE_ERROR,
  // FAIL, TIMEOUT, CRASH, REJECTED, LOST, CANCELLED). A failed trial counts as seen (never proposed again) but
  // never as a parent or a good trial.
  std::optional<double> value;
};

// Options of every strategy; each strategy reads the fields that concern it. make_strategy()
// rejects values out of the documented ranges.
struct StrategyOptions {
  // Constraint pruning (shared memory, registers, threads per block ...): no strategy proposes a
  // configuration for which this returns false. Empty: every point is feasible. Called only from
  // propose(), on full configurations of the space; it must be deterministic.
  std::function<bool(const Config&)> feasible;

  // evolutionary, tpe: propose random points until this many successful trials exist (>= 1).
  size_t startup_trials = 8;

  // random (and the random phase of the others): spaces of at most this many points are sampled
  // exactly, by listing the unseen points; larger ones by rejection.
  uint64_t exact_random_limit = uint64_t{1} << 16;
  // Rejection sampling gives up after this many rejected draws in a row (>= 1).
  size_t random_max_attempts = 1000;

  // evolutionary: parents come from the best population_size successful trials (>= 1) by
  // tournaments of tournament_size (>= 1) draws with replacement.
  size_t population_size = 24;
  size_t tournament_size = 3;
  // Per tunable of a child: probability of moving to a neighbouring value in its list, else of
  // moving to a uniformly random value. Each in [0, 1], their sum <= 1.
  double mutation_neighbour_probability = 0.2;
  double mutation_random_probability = 0.04;
  // A child that is seen, infeasible or already in the batch is mutated again (one tunable at a
  // time) up to this many times (>= 1); then the slot is filled at random.
  size_t max_mutation_attempts = 64;
  // Per proposal slot: probability of a local-search step instead of a child ([0, 1]; 0: the plain
  // genetic algorithm, with the same proposals as before the local search existed). The step
  // proposes an unseen neighbour of one of the best local_search_elite (>= 1) successful trials
  // (see "evolutionary" above); when they have none left, the slot gets a child.
  double local_search_probability = 0.5;
  size_t local_search_elite = 3;

  // tpe: fraction of successful trials that are "good" (in (0, 1); at least one trial is).
  double gamma = 0.25;
  // Weight of the uniform prior in each density, in observations (> 0).
  double prior_weight = 1.0;
  // Weight of each neighbouring value relative to the observed one, before normalising ([0, 1]).
  double neighbour_weight = 0.5;
  // Candidates drawn from l(x) per proposal (>= 1), and rounds of drawing before a slot whose
  // candidates were all seen falls back to random (>= 1).
  size_t tpe_candidates = 32;
  size_t tpe_max_rounds = 4;
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // Up to n configurations of the space that are feasible, not in history (failed trials
  // included) and pairwise distinct; fewer, possibly none, only when the feasible space is
  // exhausted (or, for spaces above exact_random_limit, when random sampling gives up). Every
  // configuration names every tunable of the space.
  //
  // A history configuration that lacks a tunable is read with the tunable's default value
  // (kernels::config_value's rule); keys that are not tunables are ignored; one with a value not
  // in a tunable's list is outside the space and only counts for plateaued().
  //
  // Batches in flight: pass the configurations proposed but not yet measured as trials with
  // value nullopt, or they may be proposed again. Proposals then depend on what is in flight,
  // which is what a restarted coordinator replays if it stores proposals before dispatching.
  virtual std::vector<Config> propose(size_t n, const std::vector<Trial>& history) const = 0;

  // The make_strategy() name: "exhaustive", "random", "evolutionary" or "tpe".
  virtual std::string name() const = 0;
};

// The names make_strategy() accepts, in order of sophistication.
std::vector<std::string> strategy_names();

// A strategy over `space`. Errors (kInvalidArgument): an unknown name (the message lists the known
// ones), a tunable with no values, repeated values or a repeated name, options out of range.
Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name,
                                                const std::vector<kernels::Tunable>& space, uint64_t seed,
                                                const StrategyOptions& opts = {});

// True when the best successful value improved by less than min_rel_improvement (0.01 = 1%),
// relative to the best before them, over the last `window` trials of history (in history order):
// the study has stopped paying and its worker capacity may go elsewhere. Failed trials count as
// trials in the window (a run of failures is no progress). False while history holds fewer than
// `window` + 1 trials or `window` is 0 (not enough evidence) and when the window found the first
// success; true when there has been no successful trial at all in at least `window` + 1 trials.
bool plateaued(const std::vector<Trial>& history, size_t window, double min_rel_improvement);

}  // namespace ak::search
