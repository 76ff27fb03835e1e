// exhaustive: the space in kernels::enumerate_space order, skipping seen and infeasible points.
// Stateless, so each call walks from the first point; for the spaces this is meant for (up to a
// few hundred thousand points) that costs far less than one measurement.
#include "coordinator/search/space.h"

namespace ak::search {
namespace {

class Exhaustive final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;

  std::vector<Config> propose(size_t n, const std::vector<Trial>& history) const override {
    Batch batch(space_, opts_, seed_, n, history);
    Point p(space_.dims(), 0);
    if (n > 0) {
      do {
        batch.take(p);
      } while (!batch.full() && space_.advance(p));
    }
    return std::move(batch).release();
  }

  std::string name() const override { return "exhaustive"; }

};

}  // namespace

std::unique_ptr<Strategy> make_exhaustive(ConfigSpace space, uint64_t seed, StrategyOptions opts) {
  return std::make_unique<Exhaustive>(std::move(space), seed, std::move(opts));
}

}  // namespace ak::search
