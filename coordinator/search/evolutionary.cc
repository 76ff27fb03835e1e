// evolutionary: a steady-state genetic algorithm whose population is the best successful trials of
// the history. Each child: two tournament winners, uniform crossover, per-tunable mutation; a
// child that cannot be proposed (seen, in the batch, infeasible) takes one more mutation at a
// time, which walks it away from the explored region instead of giving up on the parents.
//
// Interleaved with it, a local search (a memetic algorithm's hill climbing): the unseen
// one-tunable neighbours of the best few trials, nearest first. The genetic algorithm alone
// often stalls one step from the best once its population has converged: children of near-equal
// parents are mostly seen points, re-mutated at random. The proposal does not know the study's
// budget, so the local search does not wait for a "tail" of it; it takes a fixed share of the
// slots from the end of the random start on, and its neighbourhood follows the incumbent as it
// improves.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "coordinator/search/space.h"

namespace ak::search {
namespace {

class Evolutionary final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;

  std::vector<Config> propose(size_t n, const std::vector<Trial>& history) const override {
    Batch batch(space_, opts_, seed_, n, history);
    if (batch.successes().size() < opts_.startup_trials) {
      batch.take_random(n);
      return std::move(batch).release();
    }
    const size_t pop = std::min(opts_.population_size, batch.successes().size());
    while (!batch.full()) {
      // No draw when local search is off, so that option reproduces the plain algorithm exactly.
      const bool local = opts_.local_search_probability > 0 && batch.rng().unit() < opts_.local_search_probability;
      if (local && take_neighbour(batch)) continue;
      if (!take_child(batch, pop) && batch.take_random(1) == 0) break;  // exhausted
    }
    return std::move(batch).release();
  }

  std::string name() const override { return "evolutionary"; }

 private:
  // Index into the population (the first `pop` successes, best first) of a tournament's winner.
  size_t tournament(Batch& b, size_t pop) const {
    size_t best = pop;
    for (size_t i = 0; i < opts_.tournament_size; ++i) best = std::min<size_t>(best, b.rng().below(pop));
    return best;
  }

  // Moves tunable d to a neighbouring value in its list (inwards at either end).
  void neighbour(Batch& b, Point& p, size_t d) const {
    const uint32_t k = space_.arity(d);
    if (k < 2) return;
    if (p[d] == 0) {
      p[d] = 1;
    } else if (p[d] + 1 == k) {
      p[d] = k - 2;
    } else {
      p[d] = b.rng().below(2) ? p[d] + 1 : p[d] - 1;
    }
  }

  // Moves tunable d to a different value, uniformly.
  void jump(Batch& b, Point& p, size_t d) const {
    const uint32_t k = space_.arity(d);
    if (k < 2) return;
    const uint32_t v = uint32_t(b.rng().below(k - 1));
    p[d] = v >= p[d] ? v + 1 : v;
  }

  // Local search: an unseen point that differs from one of the best local_search_elite successes
  // in one tunable, nearest first (ordinal distance in the tunable's list), the better parent
  // first at equal distance, uniformly among equals. False when there is none.
  bool take_neighbour(Batch& b) const {
    const size_t elite = std::min(opts_.local_search_elite, b.successes().size());
    uint32_t reach = 0;
    for (size_t d = 0; d < space_.dims(); ++d) reach = std::max(reach, space_.arity(d));
    std::vector<Point> candidates;
    for (uint32_t dist = 1; dist < reach; ++dist) {
      for (size_t r = 0; r < elite; ++r) {
        const Point& parent = b.successes()[r].point;
        candidates.clear();
        for (size_t d = 0; d < space_.dims(); ++d) {
          for (const int64_t step : {-int64_t(dist), int64_t(dist)}) {
            const int64_t v = int64_t(parent[d]) + step;
            if (v < 0 || v >= int64_t(space_.arity(d))) continue;
            Point q = parent;
            q[d] = uint32_t(v);
            if (b.available(q)) candidates.push_back(std::move(q));
          }
        }
        while (!candidates.empty()) {
          const size_t i = b.rng().below(candidates.size());
          if (b.take(candidates[i])) return true;
          candidates.erase(candidates.begin() + ptrdiff_t(i));  // infeasible
        }
      }
    }
    return false;
  }

  bool take_child(Batch& b, size_t pop) const {
    const Point& a = b.successes()[tournament(b, pop)].point;
    const Point& c = b.successes()[tournament(b, pop)].point;
    Point child(space_.dims());
    for (size_t d = 0; d < space_.dims(); ++d) child[d] = b.rng().below(2) ? a[d] : c[d];
    for (size_t d = 0; d < space_.dims(); ++d) {
      const double u = b.rng().unit();
      if (u < opts_.mutation_neighbour_probability) {
        neighbour(b, child, d);
      } else if (u < opts_.mutation_neighbour_probability + opts_.mutation_random_probability) {
        jump(b, child, d);
      }
    }
    if (space_.dims() == 0) return b.take(child);
    for (size_t attempt = 0; attempt < opts_.max_mutation_attempts; ++attempt) {
      if (b.take(child)) return true;
      // Re-mutate one tunable, to a neighbour or any value in the ratio of the mutation
      // probabilities (neighbours only when both are 0): the child stays near its parents.
      const size_t d = b.rng().below(space_.dims());
      const double pn = opts_.mutation_neighbour_probability, pr = opts_.mutation_random_probability;
      if (pn + pr == 0 || b.rng().unit() * (pn + pr) < pn) {
        neighbour(b, child, d);
      } else {
        jump(b, child, d);
      }
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Strategy> make_evolutionary(ConfigSpace space, uint64_t seed, StrategyOptions opts) {
  return std::make_unique<Evolutionary>(std::move(space), seed, std::move(opts));
}

}  // namespace ak::search
