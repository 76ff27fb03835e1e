// Internal to coordinator/search: the indexed view of a search space that every strategy works
// in, the portable random draws, and the batch under construction in one propose() call.
// Not for use outside coordinator/search/*.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/search/strategy.h"
#include "kernels/registry.h"

namespace ak::search {

// A point as one value index per tunable, in the space's tunable order.
using Point = std::vector<uint32_t>;

class ConfigSpace {
 public:
  // Errors: a tunable without values, a repeated tunable name or a repeated value in one list.
  static Result<ConfigSpace> make(const std::vector<kernels::Tunable>& tunables);

  size_t dims() const { return tunables_.size(); }
  uint32_t arity(size_t d) const { return uint32_t(tunables_[d].values.size()); }
  // Number of points; nullopt when it does not fit in 64 bits.
  std::optional<uint64_t> size() const { return size_; }

  // The index-th point of kernels::enumerate_space order (last tunable fastest); index < size().
  Point point_at(uint64_t index) const;
  // The next point in that order; false after the last one (p is then all zeros again).
  bool advance(Point& p) const;
  Config config_of(const Point& p) const;
  // A missing tunable takes its default; keys that are not tunables are ignored; nullopt when a
  // value (or a missing tunable's default) is not in the tunable's list.
  std::optional<Point> point_of(const Config& c) const;

 private:
  std::vector<kernels::Tunable> tunables_;
  std::optional<uint64_t> size_;
};

// Random draws from the engine's raw 64-bit output, identical on every standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, n), n >= 1 (rejection of the biased top range).
  uint64_t below(uint64_t n);
  // Uniform in [0, 1).
  double unit();

 private:
  std::mt19937_64 engine_;
};

// The engine seed of one propose() call: the strategy's seed mixed with the history's length and
// a hash (FNV-1a) of its configurations and of which trials succeeded.
uint64_t proposal_seed(uint64_t seed, const std::vector<Trial>& history);

// One successful trial inside the space.
struct Scored {
  Point point;
  double value;
};

// The state of one propose() call: the points it may no longer propose (seen in history, already
// proposed in this batch, found infeasible) and the configurations proposed so far.
class Batch {
 public:
  Batch(const ConfigSpace& space, const StrategyOptions& opts, uint64_t seed, size_t n,
        const std::vector<Trial>& history);

  Rng& rng() { return rng_; }
  const ConfigSpace& space() const { return space_; }
  bool full() const { return out_.size() >= n_; }
  // Successful trials inside the space, best (lowest value) first; ties in history order.
  const std::vector<Scored>& successes() const { return successes_; }

  // True when p is neither seen, nor in this batch, nor known infeasible.
  bool available(const Point& p) const;
  // Adds p to the batch if it is available and feasible (the predicate result is remembered).
  bool take(const Point& p);
  // Adds uniformly random available feasible points until the batch is full or `slots` were
  // added; returns how many were added (fewer: the space is exhausted, or rejection sampling gave
  // up, see StrategyOptions::exact_random_limit).
  size_t take_random(size_t slots);

  std::vector<Config> release() && { return std::move(out_); }

 private:
  const ConfigSpace& space_;
  const StrategyOptions& opts_;
  Rng rng_;
  size_t n_;
  std::set<Point> taken_;       // seen in history or proposed in this batch
  std::set<Point> infeasible_;  // rejected by opts.feasible during this call
  std::vector<Scored> successes_;
  std::vector<Config> out_;
};

// One factory per strategy (coordinator/search/<name>.cc); the space and options are validated.
// What every strategy holds: the indexed space, its seed and options. Strategies keep no other
// state, so a proposal depends only on these and the history.
class SpaceStrategy : public Strategy {
 public:
  SpaceStrategy(ConfigSpace space, uint64_t seed, StrategyOptions opts)
      : space_(std::move(space)), seed_(seed), opts_(std::move(opts)) {}

 protected:
  ConfigSpace space_;
  uint64_t seed_;
  StrategyOptions opts_;
};

std::unique_ptr<Strategy> make_exhaustive(ConfigSpace space, uint64_t seed, StrategyOptions opts);
std::unique_ptr<Strategy> make_random(ConfigSpace space, uint64_t seed, StrategyOptions opts);
std::unique_ptr<Strategy> make_evolutionary(ConfigSpace space, uint64_t seed, StrategyOptions opts);
std::unique_ptr<Strategy> make_tpe(ConfigSpace space, uint64_t seed, StrategyOptions opts);

}  // namespace ak::search
