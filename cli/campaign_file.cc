#include "cli/campaign_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "common/file.h"
#include "common/json_limits.h"
#include "common/protocol.h"

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

namespace {
namespace fs = std::filesystem;

// true when `path` is `root` or lies under it (both canonical).
bool is_under(const fs::path& path, const fs::path& root) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p)
    if (p == path.end() || *p != *r) return false;
  return true;
}
}  // namespace

Result<std::string> read_source_file(const std::string& campaign_path, const std::string& source_file,
                                     bool allow_source_outside) {
  const std::string hint =
      "; name a file under the campaign file's folder or the current folder, or pass "
      "--allow-source-outside";
  if (source_file.empty()) return Status::invalid("source_file is empty");
  const fs::path named(source_file);
  const fs::path campaign_dir =
      fs::path(campaign_path).parent_path().empty() ? fs::path(".") : fs::path(campaign_path).parent_path();
  if (!allow_source_outside) {
    if (named.is_absolute()) return Status::invalid("source_file '" + source_file + "' is an absolute path" + hint);
    for (const auto& part : named)
      if (part == "..") return Status::invalid("source_file '" + source_file + "' climbs out with '..'" + hint);
  }
  const fs::path full = named.is_absolute() ? named : campaign_dir / named;
  std::error_code ec;
  const fs::path real = fs::canonical(full, ec);
  if (ec) return Status::not_found("source_file " + full.string() + " named by " + campaign_path + ": " + ec.message());
  if (!allow_source_outside) {
    const fs::path dir_real = fs::canonical(campaign_dir, ec);
    const fs::path cwd_real = fs::canonical(fs::current_path(ec), ec);
    if (!(is_under(real, dir_real) || is_under(real, cwd_real)))
      return Status::invalid("source_file '" + source_file + "' resolves to " + real.string() +
                             ", outside the campaign file's folder and the current folder" + hint);
  }
  if (!fs::is_regular_file(real, ec)) return Status::invalid("source_file " + full.string() + " is not a regular file");
  const auto size = fs::file_size(real, ec);
  if (ec) return Status::not_found("source_file " + full.string() + ": " + ec.message());
  if (size > protocol::kMaxFrameBytes)
    return Status::invalid("source_file " + full.string() + " is " + std::to_string(size) +
                           " bytes; the coordinator accepts requests of at most " +
                           std::to_string(protocol::kMaxFrameBytes) + " bytes (common/PROTOCOL.md, \"Limits\")");
  auto text = read_file(real.string());
  if (!text.ok())
    return Status::not_found("source_file " + full.string() + " named by " + campaign_path + " is unreadable");
  return *text;
}

Result<nlohmann::json> load_campaign_file(const std::string& path, bool allow_source_outside) {
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
    // toml++ bounds its own nesting; the document it gives must still fit the protocol's.
    if (Status s = check_json_depth(doc.dump()); !s.ok())
      return Status::invalid("campaign file " + path + ": " + s.message());
  } else {
    if (Status s = check_json_depth(*text); !s.ok())
      return Status::invalid("campaign file " + path + ": " + s.message());
    doc = nlohmann::json::parse(*text, nullptr, false);
    if (doc.is_discarded()) return Status::invalid("campaign file " + path + " is not valid JSON");
  }
  if (doc.is_object() && doc.contains("source_file")) {
    if (!doc["source_file"].is_string())
      return Status::invalid("campaign file " + path + ": 'source_file' must be a string");
    auto src = read_source_file(path, doc["source_file"].get<std::string>(), allow_source_outside);
    if (!src.ok()) return src.status();
    doc.erase("source_file");
    doc["source"] = *src;
  }
  return doc;
}

}  // namespace ak::cli
