#include "coordinator/search/space.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

namespace ak::search {

Result<ConfigSpace> ConfigSpace::make(const std::vector<kernels::Tunable>& tunables) {
  ConfigSpace s;
  std::set<std::string> names;
  uint64_t size = 1;
  bool fits = true;
  for (const kernels::Tunable& t : tunables) {
    if (!names.insert(t.name).second)
      return Status::invalid("search space names tunable '" + t.name + "' twice; give each tunable one entry");
    if (t.values.empty())
      return Status::invalid("tunable '" + t.name + "' has no values; a search space needs at least one per tunable");
    if (t.values.size() > std::numeric_limits<uint32_t>::max())
      return Status::invalid("tunable '" + t.name + "' has more than 2^32 - 1 values");
    std::set<int64_t> seen(t.values.begin(), t.values.end());
    if (seen.size() != t.values.size())
      return Status::invalid("tunable '" + t.name + "' lists a value twice; list each value once");
    if (fits && size > std::numeric_limits<uint64_t>::max() / t.values.size()) fits = false;
    if (fits) size *= t.values.size();
  }
  s.tunables_ = tunables;
  if (fits) s.size_ = size;
  return s;
}

Point ConfigSpace::point_at(uint64_t index) const {
  Point p(dims(), 0);
  for (size_t d = dims(); d > 0; --d) {
    p[d - 1] = uint32_t(index % arity(d - 1));
    index /= arity(d - 1);
  }
  return p;
}

bool ConfigSpace::advance(Point& p) const {
  for (size_t d = dims(); d > 0; --d) {
    if (++p[d - 1] < arity(d - 1)) return true;
    p[d - 1] = 0;
  }
  return false;
}

Config ConfigSpace::config_of(const Point& p) const {
  Config c;
  for (size_t d = 0; d < dims(); ++d) c[tunables_[d].name] = tunables_[d].values[p[d]];
  return c;
}

std::optional<Point> ConfigSpace::point_of(const Config& c) const {
  Point p(dims(), 0);
  for (size_t d = 0; d < dims(); ++d) {
    const kernels::Tunable& t = tunables_[d];
    auto it = c.find(t.name);
    const int64_t v = it == c.end() ? t.default_value : it->second;
    auto pos = std::find(t.values.begin(), t.values.end(), v);
    if (pos == t.values.end()) return std::nullopt;
    p[d] = uint32_t(pos - t.values.begin());
  }
  return p;
}

uint64_t Rng::below(uint64_t n) {
  // Reject the top partial range so every residue is equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return x % n;
}

double Rng::unit() { return double(engine_() >> 11) * 0x1.0p-53; }

namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

void fnv(uint64_t& h, const void* data, size_t len) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; ++i) {
    h ^= b[i];
    h *= kFnvPrime;
  }
}

void fnv_u64(uint64_t& h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));  // byte order fixed
  fnv(h, b, 8);
}

// splitmix64's finaliser: spreads nearby seeds over the whole engine state.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t proposal_seed(uint64_t seed, const std::vector<Trial>& history) {
  uint64_t h = kFnvOffset;
  for (const Trial& t : history) {
    fnv_u64(h, t.config.size());
    for (const auto& [name, value] : t.config) {
      fnv_u64(h, name.size());
      fnv(h, name.data(), name.size());
      fnv_u64(h, uint64_t(value));
    }
    fnv_u64(h, t.value.has_value() ? 1 : 0);
  }
  return mix(mix(seed) ^ mix(h) ^ uint64_t(history.size()));
}

Batch::Batch(const ConfigSpace& space, const StrategyOptions& opts, uint64_t seed, size_t n,
             const std::vector<Trial>& history)
    : space_(space), opts_(opts), rng_(proposal_seed(seed, history)), n_(n) {
  for (const Trial& t : history) {
    std::optional<Point> p = space.point_of(t.config);
    if (!p) continue;
    taken_.insert(*p);
    if (t.value) successes_.push_back({std::move(*p), *t.value});
  }
  std::stable_sort(successes_.begin(), successes_.end(),
                   [](const Scored& a, const Scored& b) { return a.value < b.value; });
  out_.reserve(n);
}

bool Batch::available(const Point& p) const { return !taken_.count(p) && !infeasible_.count(p); }

bool Batch::take(const Point& p) {
  if (full() || !available(p)) return false;
  Config c = space_.config_of(p);
  if (opts_.feasible && !opts_.feasible(c)) {
    infeasible_.insert(p);
    return false;
  }
  taken_.insert(p);
  out_.push_back(std::move(c));
  return true;
}

size_t Batch::take_random(size_t slots) {
  const size_t before = out_.size();
  const size_t want = std::min(n_, before + slots);
  if (space_.size() && *space_.size() <= opts_.exact_random_limit) {
    // Exact: a partial Fisher-Yates shuffle of the points still available.
    std::vector<uint64_t> pool;
    Point p(space_.dims(), 0);
    uint64_t index = 0;
    do {
      if (available(p)) pool.push_back(index);
      ++index;
    } while (space_.advance(p));
    for (size_t i = 0; i < pool.size() && out_.size() < want; ++i) {
      std::swap(pool[i], pool[i + rng_.below(pool.size() - i)]);
      take(space_.point_at(pool[i]));
    }
  } else {
    size_t misses = 0;
    Point p(space_.dims(), 0);
    while (out_.size() < want && misses < opts_.random_max_attempts) {
      for (size_t d = 0; d < space_.dims(); ++d) p[d] = uint32_t(rng_.below(space_.arity(d)));
      if (take(p)) {
        misses = 0;
      } else {
        ++misses;
      }
    }
  }
  return out_.size() - before;
}

}  // namespace ak::search
