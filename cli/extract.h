// Extraction: a model's profile (protocol::ModelProfile, models/README.md) turned into a study
// campaign (coordinator/CAMPAIGNS.md, "Study campaigns") whose targets are the profile's targets
// with the model's real shapes and their shares of its device time, so that the campaign's
// allocator spends worker capacity by Amdahl's law over the real workload.
//
// A target is kept when its kernel type has the backend and dtype, the type accepts its shape
// (KernelSpec::check_shape), its layout needs nothing the type lacks (a batched matmul, grouped-
// query or masked attention are left out, each with its reason) and its share is at least
// min_share. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"

namespace ak::cli {

struct ExtractOptions {
  std::string backend = "cuda";
  std::string gpu_model;  // empty: the profile's GPU
  double min_share = 0.005;
  int budget_trials = 32;
  std::string strategy = "tpe";
};

struct ExtractedTarget {
  protocol::ModelTargetRow target;
  bool kept = false;
  std::string why;  // when left out
};

struct Extraction {
  std::vector<ExtractedTarget> targets;  // every target of the profile, kept or not, largest first
  double kept_share = 0;                 // Σ f of the kept targets
  nlohmann::json campaign;               // the study campaign; null when nothing is kept
};

Extraction extract(const protocol::ModelProfile& profile, const ExtractOptions& options);

}  // namespace ak::cli
