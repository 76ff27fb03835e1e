// evolutionary: a steady-state genetic algorithm whose population is the best successful trials of
// the history. Each child: two tournament winners, uniform crossover, per-tunable mutation; a
// child that cannot be proposed (seen, in the batch, infeasible) takes one more mutation at a
// time, which walks it away from the explored region instead of giving up on the parents.
#include <algorithm>

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
