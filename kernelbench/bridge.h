// The KernelBench bridge: problems from a local KernelBench checkout or from the Hugging Face
// dataset's files on this machine, and candidate generations from a folder in KernelBench's naming,
// each with the hash of its code. No network. The problems' own Python runs only inside the harness
// (kernelbench/harness/) on a worker; the dataset's Parquet files are read by pyarrow in a Python
// subprocess (kernelbench/hf_dataset.py, embedded), which runs none of the problems' code.
//
// A checkout is any of: the repository root (holding KernelBench/level1 ...), its KernelBench/
// folder, or a folder that holds level1/ ... directly (the tests' problems). Problem files are
// level{L}/{id}_{name}.py; `name` below is the file name with ".py", as KernelBench's baseline
// JSON keys problems. Generations are files named level_{L}_problem_{P}_sample_{S}_kernel.py,
// found anywhere under the folder given (KernelBench's scripts write runs/<run>/...).
//
// The Hugging Face dataset (ScalingIntelligence/KernelBench): a folder holding its Parquet files,
// level_<N>-<shard>-of-<shards>.parquet anywhere below it (data/ of the dataset's repository, or
// the datasets cache), when the folder holds no level1/ ...; `name` gets ".py" appended, `path` is
// the Parquet file.
//
// Pure functions of the files they read (and, for the dataset, of the Python they run);
// thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ak::kernelbench {

struct Problem {
  int level = 0;
  int problem_id = 0;
  std::string name;       // "1_Square_matrix_multiplication_.py"
  std::string path;       // absolute path of the file read
  std::string code;
  std::string code_hash;  // xxh64 of code, hex
};

// Which problems: levels (empty: 1..4) and, per level or for all, problem ids (empty: all).
struct Selection {
  std::set<int> levels;
  std::set<int> ids;
  bool matches(int level, int problem_id) const;
};

// A non-negative decimal of 1 to 9 digits and nothing else (an id in a file name or a JSON key).
bool parse_int(const std::string& s, int* out);

// Parses "1-10,15,20-22" into ids; errors name the bad piece.
Result<std::set<int>> parse_id_ranges(const std::string& text);

// The id of a problem file name "<id>_<name>.py" (the digits before the first '_'), or nullopt.
std::optional<int> problem_id_of(const std::string& file_name);

// The folder that holds level1/ ... under `root`, or kNotFound saying what was looked for.
Result<std::string> find_levels_dir(const std::string& root);

// Every problem of the checkout (or of the dataset's files) that `sel` selects, sorted by (level,
// id). A file whose name does not start with "<id>_" is skipped; two files (or rows) with one
// (level, id) are an error naming both. `python` (with pyarrow) reads the dataset's files.
Result<std::vector<Problem>> load_problems(const std::string& root, const Selection& sel,
                                           const std::string& python = "python3");

// Whether `root` holds the dataset's Parquet files (and no checkout), and the problems in them.
bool has_hf_dataset(const std::string& root);
Result<std::vector<Problem>> load_hf_dataset(const std::string& root, const Selection& sel,
                                             const std::string& python = "python3");

struct Generation {
  int level = 0;
  int problem_id = 0;
  int sample_id = 0;
  std::string path;
  std::string code;
  std::string code_hash;
};

// Parses "level_1_problem_23_sample_0_kernel.py"; nullopt for any other name.
std::optional<Generation> parse_generation_name(const std::string& file_name);
// Every generation file under `dir` (recursively), sorted by (level, problem, sample); the same
// (level, problem, sample) twice is an error naming both paths.
Result<std::vector<Generation>> load_generations(const std::string& dir, const Selection& sel);

std::string xxh64_hex(const std::string& text);

}  // namespace ak::kernelbench
