"""Reads KernelBench problems from the Hugging Face dataset's files on this machine.

    python kernelbench/hf_dataset.py FOLDER

The dataset ScalingIntelligence/KernelBench has one split per level (level_1 ... level_4), each
stored as Parquet files named <split>-<shard>-of-<shards>.parquet (under data/ in the dataset's
repository, as `huggingface-cli download --repo-type dataset` or the `datasets` cache leave them),
with the columns code, level, name (the problem file's name without ".py") and problem_id, as
KernelBench's make_hf_dataset.py writes them. Every such file below FOLDER is read with pyarrow;
nothing is fetched. Prints one JSON object on one line of stdout:
    {"problems": [{"level", "problem_id", "name", "code", "file"}, ...]}
Exit 2 with the reason on stderr for a folder without such files, a missing column, a row whose
level disagrees with its split, or no pyarrow. The C++ bridge (kernelbench/bridge.h) embeds and
runs this script.
"""
import json
import os
import re
import sys

SPLIT = re.compile(r"^level_(\d+)-\d+-of-\d+\.parquet$")
COLUMNS = ("code", "level", "name", "problem_id")


def fail(message):
    print(f"hf_dataset: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        fail("usage: hf_dataset.py FOLDER (a folder holding the dataset's level_<N>-*.parquet files)")
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        fail(f"pyarrow is needed to read the dataset's Parquet files ({e}); pip install pyarrow")
    files = []
    for dirpath, _, names in os.walk(argv[1]):
        files += [(int(m.group(1)), os.path.join(dirpath, n)) for n in names if (m := SPLIT.match(n))]
    if not files:
        fail(f"no level_<N>-<shard>-of-<shards>.parquet files under {argv[1]}")
    problems = []
    for split_level, path in sorted(files):
        table = pq.read_table(path)
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            fail(f"{path}: no column {', '.join(missing)} (expected {', '.join(COLUMNS)})")
        for row in table.select(list(COLUMNS)).to_pylist():
            if row["level"] != split_level:
                fail(f"{path}: problem {row['problem_id']} says level {row['level']} in split level_{split_level}")
            name = row["name"] if row["name"].endswith(".py") else row["name"] + ".py"
            problems.append({"level": split_level, "problem_id": int(row["problem_id"]), "name": name,
                             "code": row["code"], "file": path})
    json.dump({"problems": problems}, sys.stdout)
    sys.stdout.write("\n")  # one line: the bridge reads it with read_line


if __name__ == "__main__":
    main(sys.argv)
