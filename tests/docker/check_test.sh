#!/usr/bin/env bash
# docker/check.sh passes on docker/ as committed, and each of its checks fails on a copy of
# docker/ with one mistake of its kind (a test of the linters' wiring, so that a check that cannot
# fail does not pass as one).
#   tests/docker/check_test.sh SOURCE_DIR VENV
set -uo pipefail
SRC=${1:?usage: check_test.sh SOURCE_DIR VENV}
VENV=${2:?usage: check_test.sh SOURCE_DIR VENV}
for t in hadolint check-jsonschema kubernetes-validate; do
  [ -x "$VENV/bin/$t" ] || { echo "$VENV/bin/$t is missing: scripts/setup.sh installs it"; exit 1; }
done
out=$(bash "$SRC/docker/check.sh" "$VENV" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "docker/check.sh failed on docker/ as committed"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
broken() {  # broken NAME FILE SED_EXPRESSION EXPECTED_FAIL_LINE
  rm -rf "$tmp/docker" && cp -r "$SRC/docker" "$tmp/docker"
  sed -i "$3" "$tmp/docker/$2"
  cmp -s "$SRC/docker/$2" "$tmp/docker/$2" && { echo "the mistake '$1' changed nothing in $2"; exit 1; }
  local o
  o=$(DOCKER_DIR="$tmp/docker" bash "$SRC/docker/check.sh" "$VENV" 2>&1)
  if [ $? -eq 0 ] || ! grep -q "^FAIL  $4" <<< "$o"; then
    echo "a mistake went unnoticed ($1 in $2); docker/check.sh printed:"; echo "$o"; exit 1
  fi
  echo "caught: $1 ($2)"
}
broken "cd inside RUN" worker.Dockerfile 's|^WORKDIR /src$|RUN cd /src \&\& ls|' "hadolint worker.Dockerfile"
broken "an unknown service key" compose.yaml 's|^    image: redis:7.2$|    imagee: redis:7.2|' "compose.yaml"
broken "a misspelt field" k8s/redis.yaml 's|^  replicas: 1$|  replica: 1|' "k8s/redis.yaml"
broken "a wrong type" k8s/worker.yaml 's|terminationGracePeriodSeconds: 120|terminationGracePeriodSeconds: soon|' "k8s/worker.yaml"
broken "an unknown setting" compose/prometheus.yml 's|^  scrape_interval: 5s$|  scrape_intervall: 5s|' "compose/prometheus.yml"
broken "an unquoted expansion" slurm/autokernel-workers.sbatch 's|^STATE=.*$|&\ncd $STATE|' "shellcheck"
echo "docker/: every check passes as committed and fails on its kind of mistake"
