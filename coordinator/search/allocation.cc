#include "coordinator/search/allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ak::search {
namespace {

size_t remaining_budget(const Target& t) {
  if (t.done) return 0;
  const size_t used = t.trials + t.in_flight;
  return used >= t.budget_trials ? 0 : t.budget_trials - used;
}

std::string target_label(const std::vector<Target>& targets, size_t i) {
  std::string s = "target " + std::to_string(i);
  if (!targets[i].name.empty()) s += " (" + targets[i].name + ")";
  return s;
}

}  // namespace

double speedup(const Target& t) {
  if (!t.best_us) return 1.0;
  if (*t.best_us <= 0.0) return std::numeric_limits<double>::infinity();
  return t.baseline_us / *t.best_us;
}

double effective_speedup(const Target& t) { return std::max(speedup(t), 1.0); }

double amdahl_estimate(const std::vector<Target>& targets) {
  // Remaining time as a fraction of the original, summed as f / s = f * best / baseline so that an
  // infinite speedup contributes 0 rather than inf arithmetic.
  double remaining = 1.0;
  for (const Target& t : targets) {
    const double inv_s = 1.0 / effective_speedup(t);  // 1/inf == 0
    remaining -= t.share * (1.0 - inv_s);
  }
  if (remaining <= 0.0) return std::numeric_limits<double>::infinity();
  return 1.0 / remaining;
}

Status validate(const std::vector<Target>& targets) {
  double total = 0.0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Target& t = targets[i];
    if (!std::isfinite(t.share) || t.share < 0.0 || t.share > 1.0)
      return Status::invalid(target_label(targets, i) + " has share " + std::to_string(t.share) +
                             "; expected a fraction of the workload's time in [0, 1]");
    if (!std::isfinite(t.baseline_us) || t.baseline_us <= 0.0)
      return Status::invalid(target_label(targets, i) + " has baseline_us " + std::to_string(t.baseline_us) +
                             "; expected the PyTorch op's measured time, > 0");
    if (t.best_us && (!std::isfinite(*t.best_us) || *t.best_us <= 0.0))
      return Status::invalid(target_label(targets, i) + " has best_us " + std::to_string(*t.best_us) +
                             "; expected a measured time > 0, or none while no trial has succeeded");
    if (!std::isfinite(t.roofline_us) || t.roofline_us < 0.0)
      return Status::invalid(target_label(targets, i) + " has roofline_us " + std::to_string(t.roofline_us) +
                             "; expected the roofline floor >= 0 (0 when unknown)");
    total += t.share;
  }
  if (total > 1.0 + 1e-9)
    return Status::invalid("target shares sum to " + std::to_string(total) +
                           "; expected at most 1 (fractions of one workload's GPU time); renormalise the profile");
  return Status::ok_status();
}

double expected_gain(const Target& t, const AllocationOptions& opts) {
  if (remaining_budget(t) == 0) return 0.0;
  const double current_us = std::min(t.best_us.value_or(t.baseline_us), t.baseline_us);
  const double potential = t.share * std::max(current_us - t.roofline_us, 0.0) / t.baseline_us;
  return potential * std::exp(-double(t.trials_since_improvement) / opts.staleness_tau_trials);
}

Result<Allocation> allocate(const std::vector<Target>& targets, size_t free_slots,
                            const AllocationOptions& opts) {
  if (Status s = validate(targets); !s.ok()) return s;
  if (!(opts.staleness_tau_trials > 0.0) || !std::isfinite(opts.staleness_tau_trials))
    return Status::invalid("staleness_tau_trials is " + std::to_string(opts.staleness_tau_trials) +
                           "; expected a positive number of trials");

  const size_t n = targets.size();
  Allocation a;
  a.slots.assign(n, 0);
  a.gain.resize(n);
  std::vector<size_t> cap(n);
  for (size_t i = 0; i < n; ++i) {
    a.gain[i] = expected_gain(targets[i], opts);
    cap[i] = remaining_budget(targets[i]);
  }
  size_t left = free_slots;

  // Exploration: one slot to each never-attempted target, larger shares first.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return targets[x].share > targets[y].share; });
  for (size_t i : order) {
    if (left == 0) break;
    const Target& t = targets[i];
    if (cap[i] > 0 && t.trials == 0 && t.in_flight == 0) {
      a.slots[i] = 1;
      --left;
    }
  }

  // Proportional share with caps: a target whose quota reaches its cap is fixed at the cap and the
  // rest is re-shared among the others, until no quota exceeds its cap (at most n rounds).
  std::vector<bool> active(n);
  for (size_t i = 0; i < n; ++i) active[i] = a.gain[i] > 0.0 && cap[i] > a.slots[i];
  std::vector<double> quota(n, 0.0);
  while (left > 0) {
    double total_gain = 0.0;
    for (size_t i = 0; i < n; ++i)
      if (active[i]) total_gain += a.gain[i];
    if (total_gain <= 0.0) break;
    bool capped = false;
    for (size_t i = 0; i < n; ++i) {
      if (!active[i]) continue;
      const size_t room = cap[i] - a.slots[i];
      quota[i] = double(left) * a.gain[i] / total_gain;
      if (quota[i] >= double(room)) {
        a.slots[i] += room;
        left -= room;
        active[i] = false;
        capped = true;
      }
    }
    if (capped) continue;  // re-share what is left among the uncapped targets

    // No quota reaches its cap: floors, then the remainder by largest fractional part. Every
    // quota is below its room, so floor + 1 never exceeds a cap.
    std::vector<size_t> by_fraction;
    size_t given = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!active[i]) continue;
      const size_t whole = std::min(size_t(std::floor(quota[i])), left - given);
      a.slots[i] += whole;
      given += whole;
      by_fraction.push_back(i);
    }
    left -= given;
    std::stable_sort(by_fraction.begin(), by_fraction.end(), [&](size_t x, size_t y) {
      return quota[x] - std::floor(quota[x]) > quota[y] - std::floor(quota[y]);
    });
    for (size_t k = 0; k < by_fraction.size() && left > 0; ++k) {
      const size_t i = by_fraction[k];
      if (a.slots[i] < cap[i]) {
        ++a.slots[i];
        --left;
      }
    }
    break;
  }

  // What no positive gain claimed goes, one slot at a time in index order, to the targets with gain
  // 0 that are neither done nor out of budget: the model puts them at their floor, yet their stop
  // rules have not ended them (a tiny op whose PyTorch time is at the bandwidth floor, a share of
  // 0). Without these slots such a study would wait forever and keep its campaign from completing.
  for (bool given = true; left > 0 && given;) {
    given = false;
    for (size_t i = 0; i < n && left > 0; ++i) {
      if (a.gain[i] > 0.0 || a.slots[i] >= cap[i]) continue;
      ++a.slots[i];
      --left;
      given = true;
    }
  }
  a.unused_slots = left;
  return a;
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kNone: return "NONE";
    case StopReason::kPlateau: return "PLATEAU";
    case StopReason::kRoofline: return "ROOFLINE";
    case StopReason::kBudget: return "BUDGET";
    case StopReason::kWallTime: return "WALL_TIME";
  }
  return "UNKNOWN";
}

StopReason stop_reason(const Target& t, const StopRule& rule, int64_t now_ms) {
  if (rule.plateau_window > 0 && t.trials_since_improvement >= rule.plateau_window) return StopReason::kPlateau;
  if (rule.roofline_fraction > 0.0 && t.roofline_us > 0.0 && t.best_us && *t.best_us > 0.0 &&
      t.roofline_us / *t.best_us >= rule.roofline_fraction)
    return StopReason::kRoofline;
  if (t.trials >= t.budget_trials) return StopReason::kBudget;
  if (rule.wall_budget_ms > 0 && now_ms - t.started_ms >= rule.wall_budget_ms) return StopReason::kWallTime;
  return StopReason::kNone;
}

size_t trials_since_improvement(const std::vector<Trial>& history, double min_rel_improvement) {
  std::optional<double> anchor;  // best at the last counted improvement
  size_t since = 0;
  for (const Trial& t : history) {
    ++since;
    if (!t.value) continue;
    if (!anchor || *anchor - *t.value >= min_rel_improvement * std::abs(*anchor)) {
      anchor = t.value;
      since = 0;
    }
  }
  return since;
}

}  // namespace ak::search
