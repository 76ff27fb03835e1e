// Lookup of tuned configurations from an exported tuning database: the file a farm writes for
// the best verified configuration of each (kernel type, GPU model, dtype, shape). Header-only, for
// programs that launch the library's kernels without the farm: load the file once, then ask for
// a configuration per launch shape.
//
// File format (format 1; JSON):
//   {"format": 1,
//    "entries": [{"kernel_type": "softmax", "gpu_model": "NVIDIA H200", "dtype": "bf16",
//                 "shape": [4096, 4096], "config": {"AK_THREADS": 128, ...},
//                 "backend": "cuda", "latency_us": 34.4, ...}, ...]}
// Keys other than these are kept by the farm (measurement, provenance; common/tuning.h writes
// the file) and ignored here. "backend" is optional; an entry without one matches any backend.
//
// find(): an entry of the same kernel type, GPU model (case-insensitive), dtype and, when the
// caller names one, backend (the cuda and triton starters take different tunables); the exact
// shape if tuned, else the nearest tuned shape of the same rank by distance in log2 of each
// dimension (shapes that differ by a constant factor are equally near whatever their size);
// nullopt when nothing of that type, model and dtype was tuned, so the caller falls back to the
// starter's default (kernels::default_config). Ties go to the entry listed first.
//
// TunedConfigs is immutable after load; find() may be called from any thread.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ak::kernels {

class TunedConfigs {
 public:
  struct Entry {
    std::string kernel_type;
    std::string gpu_model;
    std::string dtype;
    std::string backend;  // "" when the file does not say
    std::vector<int64_t> shape;
    std::map<std::string, int64_t> config;
  };
  struct Match {
    std::map<std::string, int64_t> config;
    std::vector<int64_t> shape;  // the tuned shape the configuration came from
    bool exact = false;
  };

  // Parses an exported database. Errors name the entry and the key at fault.
  static Result<TunedConfigs> parse(const nlohmann::json& doc) {
    if (!doc.is_object() || doc.value("format", 0) != 1)
      return Status::invalid("tuning database: expected an object with \"format\": 1");
    if (!doc.contains("entries") || !doc.at("entries").is_array())
      return Status::invalid("tuning database: \"entries\" must be a list");
    TunedConfigs t;
    size_t i = 0;
    for (const auto& e : doc.at("entries")) {
      try {
        Entry x;
        x.kernel_type = e.at("kernel_type").get<std::string>();
        x.gpu_model = lower(e.at("gpu_model").get<std::string>());
        x.dtype = e.at("dtype").get<std::string>();
        x.backend = e.value("backend", "");
        x.shape = e.at("shape").get<std::vector<int64_t>>();
        x.config = e.at("config").get<std::map<std::string, int64_t>>();
        for (int64_t d : x.shape)
          if (d < 1) return Status::invalid("tuning database: entry " + std::to_string(i) + " has a dimension < 1");
        t.entries_.push_back(std::move(x));
      } catch (const nlohmann::json::exception& ex) {
        return Status::invalid("tuning database: entry " + std::to_string(i) + ": " + ex.what());
      }
      ++i;
    }
    return t;
  }

  static Result<TunedConfigs> load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return Status::not_found("tuning database " + path + " cannot be read");
    nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return Status::invalid("tuning database " + path + " is not JSON");
    return parse(doc);
  }

  std::optional<Match> find(const std::string& kernel_type, const std::string& gpu_model, const std::string& dtype,
                            const std::vector<int64_t>& shape, const std::string& backend = "") const {
    const std::string model = lower(gpu_model);
    const Entry* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const Entry& e : entries_) {
      if (e.kernel_type != kernel_type || e.gpu_model != model || e.dtype != dtype || e.shape.size() != shape.size())
        continue;
      if (!backend.empty() && !e.backend.empty() && e.backend != backend) continue;
      double d = 0;
      for (size_t k = 0; k < shape.size(); ++k) {
        const double r = std::log2(double(std::max<int64_t>(shape[k], 1))) - std::log2(double(e.shape[k]));
        d += r * r;
      }
      if (d < best_d) {
        best_d = d;
        best = &e;
      }
    }
    if (!best) return std::nullopt;
    return Match{best->config, best->shape, best->shape == shape};
  }

  size_t size() const { return entries_.size(); }

 private:
  static std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  std::vector<Entry> entries_;
};

}  // namespace ak::kernels
