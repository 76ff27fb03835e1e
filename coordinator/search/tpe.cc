// tpe: tree-structured Parzen estimator over value indices (Bergstra et al., NeurIPS 2011).
// The tunables of a kernel space are few and discrete, so each density is a categorical
// distribution per tunable: a uniform prior of prior_weight observations plus, per trial, a kernel
// of weight 1 on its value and neighbour_weight on each neighbouring value in the list, normalised
// to one observation. The product over tunables gives l(x) (good trials) and g(x) (the rest);
// candidates are drawn from l and the unseen one with the largest l(x)/g(x) is proposed, which
// is the expected-improvement maximiser of the TPE paper.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "coordinator/search/space.h"

namespace ak::search {
namespace {

// log density per tunable and value: logp[d][k].
using LogDensity = std::vector<std::vector<double>>;

class Tpe final : public SpaceStrategy {
 public:
  using SpaceStrategy::SpaceStrategy;

  std::vector<Config> propose(size_t n, const std::vector<Trial>& history) const override {
    Batch batch(space_, opts_, seed_, n, history);
    const std::vector<Scored>& s = batch.successes();
    if (s.size() < opts_.startup_trials) {
      batch.take_random(n);
      return std::move(batch).release();
    }
    const size_t good = std::clamp<size_t>(size_t(std::ceil(opts_.gamma * double(s.size()))), 1, s.size());
    std::vector<std::vector<double>> l_prob;
    const LogDensity l = density(s.begin(), s.begin() + ptrdiff_t(good), &l_prob);
    const LogDensity g = density(s.begin() + ptrdiff_t(good), s.end(), nullptr);

    std::vector<Point> cand(opts_.tpe_candidates, Point(space_.dims()));
    std::vector<double> score(cand.size());
    std::vector<size_t> order(cand.size());
    while (!batch.full()) {
      bool taken = false;
      for (size_t round = 0; round < opts_.tpe_max_rounds && !taken; ++round) {
        for (size_t i = 0; i < cand.size(); ++i) {
          score[i] = 0;
          for (size_t d = 0; d < space_.dims(); ++d) {
            cand[i][d] = draw(batch.rng(), l_prob[d]);
            score[i] += l[d][cand[i][d]] - g[d][cand[i][d]];
          }
        }
        std::iota(order.begin(), order.end(), size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
        for (size_t i : order)
          if ((taken = batch.take(cand[i]))) break;
      }
      if (!taken && batch.take_random(1) == 0) break;  // exhausted
    }
    return std::move(batch).release();
  }

  std::string name() const override { return "tpe"; }

 private:
  // The smoothed categorical densities of trials [first, last); their probabilities in *prob.
  LogDensity density(std::vector<Scored>::const_iterator first, std::vector<Scored>::const_iterator last,
                     std::vector<std::vector<double>>* prob) const {
    const double n = double(last - first);
    LogDensity out(space_.dims());
    if (prob) prob->assign(space_.dims(), {});
    for (size_t d = 0; d < space_.dims(); ++d) {
      const uint32_t k = space_.arity(d);
      std::vector<double> w(k, opts_.prior_weight / double(k));
      for (auto it = first; it != last; ++it) {
        const uint32_t x = it->point[d];
        const bool lo = x > 0, hi = x + 1 < k;
        const double total = 1.0 + opts_.neighbour_weight * (double(lo) + double(hi));
        w[x] += 1.0 / total;
        if (lo) w[x - 1] += opts_.neighbour_weight / total;
        if (hi) w[x + 1] += opts_.neighbour_weight / total;
      }
      out[d].resize(k);
      for (uint32_t v = 0; v < k; ++v) {
        w[v] /= opts_.prior_weight + n;
        out[d][v] = std::log(w[v]);
      }
      if (prob) (*prob)[d] = std::move(w);
    }
    return out;
  }

  static uint32_t draw(Rng& rng, const std::vector<double>& p) {
    double u = rng.unit();
    for (uint32_t v = 0; v + 1 < p.size(); ++v) {
      if (u < p[v]) return v;
      u -= p[v];
    }
    return uint32_t(p.size() - 1);
  }
};

}  // namespace

std::unique_ptr<Strategy> make_tpe(ConfigSpace space, uint64_t seed, StrategyOptions opts) {
  return std::make_unique<Tpe>(std::move(space), seed, std::move(opts));
}

}  // namespace ak::search
