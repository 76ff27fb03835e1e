// submit, status, results, export: thin clients of the coordinator's client API.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/campaign_file.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "common/result_fields.h"
#include "coordinator/client.h"

namespace ak::cli {

using nlohmann::json;

int submit(const ClientArgs& c, const std::string& campaign_file, bool wait) {
  auto doc = load_campaign_file(campaign_file);
  if (!doc.ok()) {
    std::cerr << "autokernel submit: " << doc.status().message() << "\n";
    return 2;
  }
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms));
  auto r = client.submit(*doc);
  if (!r.ok()) {
    std::cerr << "autokernel submit: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << "campaign " << (*r)["campaign_id"].get<std::string>() << ": " << (*r)["jobs"] << " jobs\n";
  if (!wait) return 0;
  return wait_for_campaign(client, (*r)["campaign_id"].get<std::string>(), stop_flag()) ? 0 : 1;
}

int status(const ClientArgs& c, bool as_json) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms));
  auto r = client.status();
  if (!r.ok()) {
    std::cerr << "autokernel status: " << r.status().message() << "\n";
    return 1;
  }
  if (as_json) {
    std::cout << r->dump(2) << "\n";
    return 0;
  }
  std::cout << format_status(*r);
  return 0;
}

int results(const ClientArgs& c, const std::string& campaign, const std::string& st, bool as_json, int limit) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms));
  auto r = client.results(campaign, st);
  if (!r.ok()) {
    std::cerr << "autokernel results: " << r.status().message() << "\n";
    return 1;
  }
  if (as_json) {
    std::cout << (*r)["rows"].dump(2) << "\n";
    return 0;
  }
  std::cout << format_results((*r)["rows"], limit);
  return 0;
}

int export_results(const ClientArgs& c, const std::string& campaign, const std::string& tsv_path,
                   const std::string& json_path) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms));
  auto r = client.results(campaign, "");
  if (!r.ok()) {
    std::cerr << "autokernel export: " << r.status().message() << "\n";
    return 1;
  }
  Status s = write_exports((*r)["rows"], tsv_path, json_path);
  if (!s.ok()) {
    std::cerr << "autokernel export: " << s.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << (*r)["rows"].size() << " rows to " << tsv_path;
  if (!json_path.empty()) std::cout << " and " << json_path;
  std::cout << "\n";
  return 0;
}

}  // namespace ak::cli
