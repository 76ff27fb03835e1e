#!/usr/bin/env bash
# What CI can check of docker/ without a container engine: the Dockerfiles linted (hadolint), the
# Compose file against the Compose specification's schema (check-jsonschema), the Kubernetes
# manifests against the API's schemas (kubernetes-validate), the Prometheus configuration of the
# Compose farm (promtool), and the shell scripts (shellcheck). The Python tools come from the
# project's environment (scripts/setup.sh installs them). Exit 0 when all pass.
#   docker/check.sh [VENV]          (default: .venv)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$(cd "$ROOT" && cd "${1:-.venv}" && pwd) || exit 2
BIN=$VENV/bin
# DOCKER_DIR: the folder checked (default: this one); the test points it at broken copies to show
# that each check can fail.
cd "${DOCKER_DIR:-$ROOT/docker}" || exit 2
fail=0
step() {
  local name=$1
  shift
  if out=$("$@" 2>&1); then
    echo "ok    $name"
  else
    echo "FAIL  $name"
    while IFS= read -r line; do echo "      $line"; done <<< "$out"
    fail=1
  fi
}
for f in coordinator.Dockerfile worker.Dockerfile; do
  # DL3008: Debian/Ubuntu packages unpinned on purpose (the distribution's security updates).
  step "hadolint $f" "$BIN/hadolint" --ignore DL3008 "$f"
done
step "compose.yaml: Compose specification" "$BIN/check-jsonschema" --builtin-schema vendor.compose-spec compose.yaml
for f in k8s/*.yaml; do
  step "$f: Kubernetes schemas" "$BIN/kubernetes-validate" --strict "$f"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp compose/prometheus.yml "$ROOT/dashboards/rules.yml" "$tmp/"
step "compose/prometheus.yml: promtool" promtool check config "$tmp/prometheus.yml"
step "shellcheck" shellcheck check.sh slurm/autokernel-workers.sbatch
exit $fail
