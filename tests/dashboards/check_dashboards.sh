#!/usr/bin/env bash
# Checks dashboards/: the Prometheus config and rules pass promtool, the rules' unit tests pass,
# the Grafana dashboard is valid JSON, and every autokernel_* series named in the dashboard and
# the rules is one the coordinator registers (common/metric_names.h; histograms also as
# _bucket, _sum and _count). Usage: check_dashboards.sh <source root>
set -euo pipefail

root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
dash="$root/dashboards"
names_h="$root/common/metric_names.h"
here="$(cd "$(dirname "$0")" && pwd)"
fail=0

command -v promtool >/dev/null || { echo "promtool not found; install the Debian package 'prometheus'" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 1; }

promtool check config "$dash/prometheus.yml"
promtool check rules "$dash/rules.yml"
promtool test rules "$here/rules_test.yml"
for f in "$dash"/grafana/*.json; do
  python3 -m json.tool "$f" >/dev/null || { echo "$f is not valid JSON" >&2; fail=1; }
done

# Registered names: every string literal in metric_names.h; histograms add their series suffixes.
mapfile -t base < <(grep -o '"autokernel_[a-z0-9_]*"' "$names_h" | tr -d '"' | sort -u)
mapfile -t hist < <(grep 'histogram' "$names_h" | grep -o '"autokernel_[a-z0-9_]*"' | tr -d '"' | sort -u)
if [ "${#base[@]}" -eq 0 ]; then echo "no metric names found in $names_h" >&2; exit 1; fi
declare -A known=()
for n in "${base[@]}"; do known[$n]=1; done
for n in "${hist[@]}"; do known[${n}_bucket]=1; known[${n}_sum]=1; known[${n}_count]=1; done

# Used names: autokernel_ followed by name characters (recording rules use autokernel:..., which
# this pattern leaves alone).
used_files=("$dash/rules.yml" "$dash"/grafana/*.json)
mapfile -t used < <(grep -oh 'autokernel_[a-zA-Z0-9_]*' "${used_files[@]}" | sort -u)
if [ "${#used[@]}" -eq 0 ]; then echo "no autokernel_* series found in the dashboard or rules" >&2; exit 1; fi
for n in "${used[@]}"; do
  if [ -z "${known[$n]:-}" ]; then
    echo "unknown series '$n' in dashboards/ (not in common/metric_names.h); fix the name or register it" >&2
    grep -n "$n" "${used_files[@]}" >&2 || true
    fail=1
  fi
done

# Registered but never shown is allowed (a new series may land before its panel), but say so.
for n in "${base[@]}"; do
  if ! printf '%s\n' "${used[@]}" | grep -q "^${n}\(_bucket\|_sum\|_count\)\?$"; then
    echo "note: $n is registered but no dashboard panel or rule uses it" >&2
  fi
done

if [ "$fail" -ne 0 ]; then echo "dashboards check FAILED" >&2; exit 1; fi
echo "dashboards check passed: ${#used[@]} series, all registered"
