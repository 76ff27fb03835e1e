#!/usr/bin/env bash
# `--inherit-env` (a profiler's injection reaching the candidates) is refused without
# `--unconfined`, by the worker and by `run`, with exit status 2 and a message naming the flag, before
# anything starts: a confined candidate's environment stays scrubbed.
#   inherit_env_test.sh AUTOKERNEL
set -u
AK=${1:?usage: inherit_env_test.sh AUTOKERNEL}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
expect_refused() {
  local what=$1
  shift
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" != 2 ] || ! grep -q -- "--inherit-env needs --unconfined" <<< "$out"; then
    echo "FAIL: $what: rc=$rc, output: $out"
    fail=1
  else
    echo "ok: $what refused: $out"
  fi
}
expect_refused "worker --inherit-env" "$AK" worker --inherit-env --backend cpu --coordinator tcp://127.0.0.1:1 \
  --cache-dir "$TMP/cache" --state-dir "$TMP/state" --metrics ""
expect_refused "run --inherit-env" "$AK" run --inherit-env --backend cpu --data-dir "$TMP/run" --out "$TMP/out"
# Nothing was started by the refused run: no Redis data, no results.
[ ! -e "$TMP/run" ] && [ ! -e "$TMP/out/results.tsv" ] || { echo "FAIL: the refused run left files"; fail=1; }
exit $fail
