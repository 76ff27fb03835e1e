// random: uniform over the unseen feasible points (Batch::take_random).
#include "coordinator/search/space.h"

namespace ak::search {
namespace {

class Random final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;

  std::vector<Config> propose(size_t n, const std::vector<Trial>& history) const override {
    Batch batch(space_, opts_, seed_, n, history);
    batch.take_random(n);
    return std::move(batch).release();
  }

  std::string name() const override { return "random"; }

};

}  // namespace

std::unique_ptr<Strategy> make_random(ConfigSpace space, uint64_t seed, StrategyOptions opts) {
  return std::make_unique<Random>(std::move(space), seed, std::move(opts));
}

}  // namespace ak::search
