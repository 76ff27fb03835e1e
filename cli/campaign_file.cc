#include "cli/campaign_file.h"

#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "common/file.h"

namespace ak::cli {

namespace {
nlohmann::json toml_to_json(const toml::node& n) {
  if (auto t = n.as_table()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : *t) j[std::string(k.str())] = toml_to_json(v);
    return j;
  }
  if (auto a = n.as_array()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& v : *a) j.push_back(toml_to_json(v));
    return j;
  }
  if (auto v = n.as_string()) return v->get();
  if (auto v = n.as_integer()) return v->get();
  if (auto v = n.as_floating_point()) return v->get();
  if (auto v = n.as_boolean()) return v->get();
  return nullptr;
}

}  // namespace

Result<nlohmann::json> load_campaign_file(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return Status::not_found("campaign file " + path + " not found or unreadable");
  nlohmann::json doc;
  const bool is_toml = path.size() > 5 && path.substr(path.size() - 5) == ".toml";
  if (is_toml) {
    try {
      toml::table t = toml::parse(*text, path);
      doc = toml_to_json(t);
    } catch (const toml::parse_error& e) {
      std::ostringstream os;
      os << e;
      return Status::invalid("campaign file " + path + " is not valid TOML: " + os.str());
    }
  } else {
    doc = nlohmann::json::parse(*text, nullptr, false);
    if (doc.is_discarded()) return Status::invalid("campaign file " + path + " is not valid JSON");
  }
  if (doc.is_object() && doc.contains("source_file")) {
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    std::string src_path = doc["source_file"].get<std::string>();
    if (!src_path.empty() && src_path[0] != '/') src_path = dir + "/" + src_path;
    auto src = read_file(src_path);
    if (!src.ok()) return Status::not_found("source_file " + src_path + " named by " + path + " is unreadable");
    doc.erase("source_file");
    doc["source"] = *src;
  }
  return doc;
}

}  // namespace ak::cli
