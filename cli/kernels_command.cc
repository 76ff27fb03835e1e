// autokernel kernels / starter / check: the kernel library and campaign documents, offline (no
// farm): what each kernel type takes, a starter source to copy, and a campaign checked by the
// coordinator's own planner (coordinator/plan.h).
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/campaign_file.h"
#include "cli/commands.h"
#include "coordinator/plan.h"
#include "kernels/registry.h"

namespace ak::cli {

namespace {

std::string dtypes_of(const kernels::KernelSpec& k) {
  std::string out;
  for (DType d : k.dtypes) out += (out.empty() ? "" : ",") + std::string(dtype_name(d));
  return out;
}

std::string backends_of(const kernels::KernelSpec& k) {
  std::string out;
  for (const auto& [b, src] : k.backends) out += (out.empty() ? "" : ",") + std::string(backend_name(b));
  return out;
}

}  // namespace

int kernels_list(const std::string& type) {
  if (type.empty()) {
    std::printf("%-24s %-15s %-18s %s\n", "type", "dtypes", "backends",
                "default shapes (cuda, else the first backend)");
    for (const kernels::KernelSpec* k : kernels::all()) {
      const auto it = k->backends.count(Backend::kCuda) ? k->backends.find(Backend::kCuda) : k->backends.begin();
      std::string shapes;
      for (const auto& s : it->second.default_shapes) shapes += (shapes.empty() ? "" : " ") + shape_string(s);
      std::printf("%-24s %-15s %-18s %s\n", k->name.c_str(), dtypes_of(*k).c_str(), backends_of(*k).c_str(),
                  shapes.c_str());
    }
    std::printf(
        "details of one: autokernel kernels TYPE; a source to start from: autokernel starter TYPE --backend B\n");
    return 0;
  }
  const kernels::KernelSpec* k = kernels::find(type);
  if (!k) {
    std::cerr << "autokernel kernels: unknown kernel type '" << type << "'; the kernel types are "
              << kernels::type_names() << "\n";
    return 2;
  }
  std::printf("%s: dtypes %s\n", k->name.c_str(), dtypes_of(*k).c_str());
  for (const auto& [dt, tol] : k->tolerance)
    std::printf("  tolerance %s: |out - ref| <= %g + %g * |ref|\n", dtype_name(dt), tol.atol, tol.rtol);
  for (const auto& [b, src] : k->backends) {
    std::printf("backend %s: entry %s\n", backend_name(b), src.entry.c_str());
    for (const auto& t : src.space) {
      std::string values;
      for (int64_t v : t.values) values += (values.empty() ? "" : ",") + std::to_string(v);
      std::printf("  tunable %-16s {%s} default %lld\n", t.name.c_str(), values.c_str(), (long long)t.default_value);
    }
    for (const auto& [dt, cfg] : src.dtype_defaults) {
      std::string c;
      for (const auto& [n, v] : cfg) c += (c.empty() ? "" : ",") + n + "=" + std::to_string(v);
      std::printf("  %s defaults: %s\n", dtype_name(dt), c.c_str());
    }
    std::string shapes;
    for (const auto& s : src.default_shapes) shapes += (shapes.empty() ? "" : " ") + shape_string(s);
    std::printf("  default shapes: %s\n", shapes.c_str());
  }
  std::string edges;
  for (const auto& s : k->edge_shapes) edges += (edges.empty() ? "" : " ") + shape_string(s);
  std::printf("edge shapes (verify.edge): %s\n", edges.c_str());
  return 0;
}

int starter(const std::string& type, const std::string& backend) {
  const kernels::KernelSpec* k = kernels::find(type);
  if (!k) {
    std::cerr << "autokernel starter: unknown kernel type '" << type << "'; the kernel types are "
              << kernels::type_names() << "\n";
    return 2;
  }
  const std::optional<Backend> b = parse_backend(backend);
  if (!b || !k->backends.count(*b)) {
    std::cerr << "autokernel starter: " << type << " has no backend '" << backend << "'; it has " << backends_of(*k)
              << "\n";
    return 2;
  }
  // The text the farm compiles when a job names no source: its includes are inlined, so it
  // compiles as is when submitted as a campaign's source_file.
  std::cout << k->backends.at(*b).source;
  return 0;
}

int check(const std::vector<std::string>& files, bool allow_source_outside) {
  int rc = 0;
  for (const std::string& f : files) {
    auto doc = load_campaign_file(f, allow_source_outside);
    if (!doc.ok()) {
      std::printf("%s: %s\n", f.c_str(), doc.status().message().c_str());
      rc = 2;
      continue;
    }
    auto c = check_campaign(*doc);
    if (!c.ok()) {
      std::printf("%s: %s\n", f.c_str(), c.status().message().c_str());
      rc = 2;
      continue;
    }
    if (c->kind == "study")
      std::printf("%s: ok, study campaign '%s': %lld studies, at most %lld trials\n", f.c_str(), c->name.c_str(),
                  (long long)c->studies, (long long)c->jobs);
    else
      std::printf("%s: ok, %s campaign '%s': %lld jobs\n", f.c_str(), c->kind.c_str(), c->name.c_str(),
                  (long long)c->jobs);
  }
  return rc;
}

}  // namespace ak::cli
