#!/usr/bin/env bash
# Install anywhere (issue 21): `cmake --install` into one folder, the tree moved to another, and a
# CPU campaign run from there: `autokernel run` starts the installed coordinator and a CPU worker,
# whose sandbox finds libtorch through the Python that AK_PYTHON names. Checks:
#   - no installed binary's RUNPATH names the build or source tree, and none has the build tree
#     in its read-only data;
#   - the campaign runs with the build tree hidden (an empty tmpfs mounted over it in a private
#     mount namespace, where the machine allows one; otherwise it says so and runs without);
#   - every result row is PASS, and the worker names its Python and that Python's torch.
#   tests/install/install_test.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
BUILD=$(realpath "$1")
SOURCE=$(realpath "$2")
PYTHON=$3
fail() { echo "install_test: $*" >&2; exit 1; }
# Not under /tmp: a confined worker gives its children a private /tmp, where an installed tree
# below it would not be seen (README, "Install").
TMP=$(mktemp -d /var/tmp/ak-install-XXXXXX)
# Readable by all: a root worker runs the sandbox as uid 65534.
chmod 0755 "$TMP"
trap 'rm -rf "$TMP"' EXIT

cmake --install "$BUILD" --prefix "$TMP/a" > "$TMP/install.log" || { cat "$TMP/install.log"; fail "cmake --install failed"; }
mv "$TMP/a" "$TMP/b"
PREFIX=$TMP/b
for f in bin/autokernel bin/autokernel-sandbox share/autokernel/examples/campaigns/smoke.json; do
  [ -e "$PREFIX/$f" ] || fail "the installed tree has no $f"
done

for f in "$PREFIX"/bin/* "$PREFIX"/lib/*.so; do
  [ -e "$f" ] || continue
  runpath=$(readelf -d "$f" | grep -E 'R(UN)?PATH' || true)
  for tree in "$BUILD" "$SOURCE"; do
    case "$runpath" in *"$tree"*) fail "$f names $tree in its RUNPATH: $runpath" ;; esac
  done
  if readelf -p .rodata "$f" 2>/dev/null | grep -qF "$BUILD/"; then
    fail "$f carries a path into the build tree $BUILD: $(readelf -p .rodata "$f" | grep -F "$BUILD/" | head -3)"
  fi
done
echo "install_test: RUNPATHs: $(readelf -d "$PREFIX/bin/autokernel-sandbox" | grep -oE 'R(UN)?PATH.*')"

# The run, from a working folder outside both trees, with the build tree hidden where possible.
mkdir -p "$TMP/work"
cat > "$TMP/run.sh" <<RUN
set -euo pipefail
cd "$TMP/work"
export PATH="$PREFIX/bin:/usr/local/bin:/usr/bin:/bin" AK_PYTHON="$PYTHON"
unset LD_LIBRARY_PATH
autokernel run --backend cpu --campaign "$PREFIX/share/autokernel/examples/campaigns/smoke.json" \
  --data-dir "$TMP/work/.ak" --out "$TMP/work"
RUN
hide=(unshare -m)
[ "$(id -u)" = 0 ] || hide=(unshare -rm)
if "${hide[@]}" true 2>/dev/null; then
  echo "install_test: running with $BUILD hidden"
  "${hide[@]}" bash -c "mount -t tmpfs -o ro,size=1m none '$BUILD' && bash '$TMP/run.sh'" > "$TMP/run.log" 2>&1 ||
    { cat "$TMP/run.log"; fail "autokernel run from the installed tree failed"; }
else
  echo "install_test: this machine allows no private mount namespace; the build tree stays visible"
  bash "$TMP/run.sh" > "$TMP/run.log" 2>&1 || { cat "$TMP/run.log"; fail "autokernel run from the installed tree failed"; }
fi
grep -q "Python $PYTHON (from AK_PYTHON), torch " "$TMP/run.log" ||
  { cat "$TMP/run.log"; fail "the worker did not name its Python (AK_PYTHON) and torch"; }
[ -f "$TMP/work/results.tsv" ] || { cat "$TMP/run.log"; fail "no results.tsv"; }
rows=$(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "correctness") c = i; next }
                   { n++; if ($c != "PASS") bad++ } END { print n + 0, bad + 0 }' "$TMP/work/results.tsv")
read -r n bad <<< "$rows"
[ "$n" -ge 1 ] || fail "results.tsv has no rows"
[ "$bad" = 0 ] || { cat "$TMP/work/results.tsv"; fail "$bad of $n rows are not PASS"; }
echo "install_test: $n rows, all PASS, from $PREFIX"
