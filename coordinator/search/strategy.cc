#include "coordinator/search/strategy.h"

#include <cmath>
#include <limits>

#include "coordinator/search/space.h"

namespace ak::search {
namespace {

Status check_options(const StrategyOptions& o) {
  auto probability = [](double p) { return std::isfinite(p) && p >= 0 && p <= 1; };
  if (o.startup_trials < 1) return Status::invalid("startup_trials is 0; it must be at least 1");
  if (o.random_max_attempts < 1) return Status::invalid("random_max_attempts is 0; it must be at least 1");
  if (o.population_size < 1) return Status::invalid("population_size is 0; it must be at least 1");
  if (o.tournament_size < 1) return Status::invalid("tournament_size is 0; it must be at least 1");
  if (!probability(o.mutation_neighbour_probability) || !probability(o.mutation_random_probability) ||
      o.mutation_neighbour_probability + o.mutation_random_probability > 1)
    return Status::invalid("mutation probabilities are " + std::to_string(o.mutation_neighbour_probability) +
                           " (neighbour) and " + std::to_string(o.mutation_random_probability) +
                           " (random); each must be in [0, 1] and their sum at most 1");
  if (o.max_mutation_attempts < 1) return Status::invalid("max_mutation_attempts is 0; it must be at least 1");
  if (!probability(o.local_search_probability))
    return Status::invalid("local_search_probability is " + std::to_string(o.local_search_probability) +
                           "; it must be in [0, 1]");
  if (o.local_search_elite < 1) return Status::invalid("local_search_elite is 0; it must be at least 1");
  if (!(o.gamma > 0 && o.gamma < 1))
    return Status::invalid("gamma is " + std::to_string(o.gamma) + "; it must be in (0, 1), e.g. 0.25");
  if (!(o.prior_weight > 0) || !std::isfinite(o.prior_weight))
    return Status::invalid("prior_weight is " + std::to_string(o.prior_weight) + "; it must be positive");
  if (!probability(o.neighbour_weight))
    return Status::invalid("neighbour_weight is " + std::to_string(o.neighbour_weight) + "; it must be in [0, 1]");
  if (o.tpe_candidates < 1) return Status::invalid("tpe_candidates is 0; it must be at least 1");
  if (o.tpe_max_rounds < 1) return Status::invalid("tpe_max_rounds is 0; it must be at least 1");
  return Status::ok_status();
}

}  // namespace

std::vector<std::string> strategy_names() { return {"exhaustive", "random", "evolutionary", "tpe"}; }

Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name, const std::vector<kernels::Tunable>& space,
                                                uint64_t seed, const StrategyOptions& opts) {
  using Factory = std::unique_ptr<Strategy> (*)(ConfigSpace, uint64_t, StrategyOptions);
  Factory factory = nullptr;
  if (name == "exhaustive") factory = make_exhaustive;
  if (name == "random") factory = make_random;
  if (name == "evolutionary") factory = make_evolutionary;
  if (name == "tpe") factory = make_tpe;
  if (!factory) {
    std::string known;
    for (const std::string& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
    return Status::invalid("unknown search strategy '" + name + "'; use one of " + known);
  }
  Result<ConfigSpace> s = ConfigSpace::make(space);
  if (!s.ok()) return s.status();
  if (Status st = check_options(opts); !st.ok()) return st;
  return factory(std::move(s).value(), seed, opts);
}

bool plateaued(const std::vector<Trial>& history, size_t window, double min_rel_improvement) {
  if (window == 0 || history.size() < window + 1) return false;
  const size_t split = history.size() - window;
  std::optional<double> before, after;
  for (size_t i = 0; i < history.size(); ++i) {
    if (!history[i].value) continue;
    std::optional<double>& best = i < split ? before : after;
    if (!best || *history[i].value < *best) best = history[i].value;
  }
  if (!before) return !after;  // no success at all: no progress; first success in the window: progress
  if (!after || *after >= *before) return true;
  return (*before - *after) < min_rel_improvement * std::abs(*before);
}

}  // namespace ak::search
