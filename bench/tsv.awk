# Prints the named columns of a results.tsv (header row names them), tab-separated.
#   awk -v cols=latency_us,baseline_us -f bench/tsv.awk results.tsv
BEGIN { FS = OFS = "\t"; n = split(cols, want, ",") }
NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; for (k = 1; k <= n; k++) if (!(want[k] in idx)) { print "no column " want[k] > "/dev/stderr"; exit 1 } next }
{ line = ""; for (k = 1; k <= n; k++) line = line (k > 1 ? OFS : "") $(idx[want[k]]); print line }
