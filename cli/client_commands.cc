// submit, status, results, export, best: thin clients of the coordinator's client API.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli/campaign_file.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "common/json_limits.h"
#include "common/result_fields.h"
#include "coordinator/client.h"

namespace ak::cli {

using nlohmann::json;

int submit(const ClientArgs& c, const std::string& campaign_file, bool wait, bool allow_source_outside) {
  auto doc = load_campaign_file(campaign_file, allow_source_outside);
  if (!doc.ok()) {
    std::cerr << "autokernel submit: " << doc.status().message() << "\n";
    return 2;
  }
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  auto r = client.submit(*doc);
  if (!r.ok()) {
    std::cerr << "autokernel submit: " << r.status().message() << "\n";
    return 1;
  }
  if (r->studies)
    std::cout << "study campaign " << r->campaign_id << " (" << r->name << "): " << *r->studies << " studies, first "
              << r->jobs << " trials proposed; more follow as results come\n";
  else
    std::cout << "campaign " << r->campaign_id << " (" << r->name << "): " << r->jobs << " jobs\n";
  if (!wait) return 0;
  const bool complete = wait_for_campaign(client, r->campaign_id, stop_flag());
  // How it ended and what to run next.
  if (auto st = client.status(); st.ok())
    for (const auto& row : st->campaigns)
      if (row.campaign_id == r->campaign_id) std::cout << campaign_summary(row, " --client " + c.endpoint);
  return complete ? 0 : 1;
}

int status(const ClientArgs& c, bool as_json) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  auto r = client.status();
  if (!r.ok()) {
    std::cerr << "autokernel status: " << r.status().message() << "\n";
    return 1;
  }
  if (as_json) {
    std::cout << json(*r).dump(2) << "\n";
    return 0;
  }
  std::cout << format_status(*r);
  return 0;
}

int cancel(const ClientArgs& c, const std::string& campaign_id, const std::string& reason) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  auto r = client.cancel(campaign_id, reason);
  if (!r.ok()) {
    std::cerr << "autokernel cancel: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << "campaign " << campaign_id << " cancelled: " << r->cancelled << " queued jobs ended, " << r->stopping
            << " running told to stop, " << r->finished << " finished before\n";
  return 0;
}

int results(const ClientArgs& c, const ResultsFilter& f, bool as_json, int limit) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  auto r = client.results(protocol::ResultsQuery{f.campaign_id, f.status, f.kernel_type, f.shape, f.gpu_model});
  if (!r.ok()) {
    std::cerr << "autokernel results: " << r.status().message() << "\n";
    return 1;
  }
  if (as_json) {  // the table's rows, in its order, as many as --limit
    std::cout << json(ordered_results(std::move(r->rows), limit)).dump(2) << "\n";
    return 0;
  }
  std::cout << format_results(r->rows, limit);
  return 0;
}

int export_results(const ClientArgs& c, const std::string& campaign, const std::string& tsv_path,
                   const std::string& json_path) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  auto r = client.results(campaign, "");
  if (!r.ok()) {
    std::cerr << "autokernel export: " << r.status().message() << "\n";
    return 1;
  }
  Status s = write_exports(r->rows, tsv_path, json_path);
  if (!s.ok()) {
    std::cerr << "autokernel export: " << s.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << r->rows.size() << " rows to " << tsv_path;
  if (!json_path.empty()) std::cout << " and " << json_path;
  std::cout << "\n";
  return 0;
}

int best(const ClientArgs& c, const BestArgs& a) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  if (!a.import_path.empty()) {
    std::ifstream in(a.import_path);
    if (!in) {
      std::cerr << "autokernel best: cannot read " << a.import_path << "\n";
      return 2;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (Status s = check_json_depth(text); !s.ok()) {
      std::cerr << "autokernel best: " << a.import_path << ": " << s.message() << "\n";
      return 2;
    }
    json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      std::cerr << "autokernel best: " << a.import_path << " is not JSON; expected a file written by autokernel best --export\n";
      return 2;
    }
    auto r = client.import_best(doc);
    if (!r.ok()) {
      std::cerr << "autokernel best: import of " << a.import_path << " failed: " << r.status().message() << "\n";
      return 1;
    }
    std::cout << "imported " << a.import_path << ": " << r->entries << " entries, " << r->stored << " stored, "
              << r->kept << " kept (this farm's entry was as fast or faster)\n";
  }
  auto r = client.best(a.query);
  if (!r.ok()) {
    std::cerr << "autokernel best: " << r.status().message() << "\n";
    return 1;
  }
  if (!a.export_path.empty()) {
    Status s = write_tuning_export(*r, a.export_path);
    if (!s.ok()) {
      std::cerr << "autokernel best: " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << r->entries.size() << " entries to " << a.export_path << "\n";
    return 0;
  }
  if (a.json) {
    std::cout << json(*r).dump(2) << "\n";
    return 0;
  }
  if (!a.import_path.empty()) return 0;
  std::cout << format_best(*r);
  return 0;
}

}  // namespace ak::cli
