#include "kernelbench/witness.h"

#include <sodium.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace ak::kernelbench {
namespace {

using nlohmann::json;

Status init_sodium() {
  static const int rc = sodium_init();  // 0 first time, 1 when already done, -1 on failure
  return rc < 0 ? Status::internal("libsodium could not be initialised") : Status::ok_status();
}

// A field that says something went wrong: its text, another type (never the witness's own) as its
// JSON, and "" only when absent or null.
std::string text_of(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::string();
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

Result<std::string> new_witness_key() {
  if (Status s = init_sodium(); !s.ok()) return s;
  std::array<unsigned char, crypto_auth_hmacsha256_KEYBYTES> key{};
  randombytes_buf(key.data(), key.size());
  std::string hex(key.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), key.data(), key.size());
  hex.pop_back();
  return hex;
}

Result<std::string> hmac_sha256_hex(const std::string& key_hex, const std::string& text) {
  if (Status s = init_sodium(); !s.ok()) return s;
  std::array<unsigned char, crypto_auth_hmacsha256_KEYBYTES> key{};
  size_t n = 0;
  if (sodium_hex2bin(key.data(), key.size(), key_hex.data(), key_hex.size(), nullptr, &n, nullptr) != 0 ||
      n != key.size())
    return Status::invalid("a witness key is 64 hex digits");
  std::array<unsigned char, crypto_auth_hmacsha256_BYTES> mac{};
  crypto_auth_hmacsha256(mac.data(), reinterpret_cast<const unsigned char*>(text.data()), text.size(), key.data());
  std::string hex(mac.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), mac.data(), mac.size());
  hex.pop_back();
  return hex;
}

Result<json> authentic_witness(const json& file, const std::string& key_hex) {
  if (!file.is_object()) return Status::invalid("the witness's result is not a JSON object");
  auto body = file.find("body");
  auto mac = file.find("mac");
  if (body == file.end() || !body->is_string()) return Status::invalid("the witness's result has no body");
  if (mac == file.end() || !mac->is_string()) return Status::invalid("the witness's result is not signed");
  auto want = hmac_sha256_hex(key_hex, body->get<std::string>());
  if (!want.ok()) return want.status();
  const std::string& got = mac->get_ref<const std::string&>();
  if (got.size() != want->size() || sodium_memcmp(got.data(), want->data(), got.size()) != 0)
    return Status::invalid("the witness's result does not carry the step's signature (forged or altered)");
  json doc = json::parse(body->get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Status::invalid("the witness's body is not a JSON object");
  return doc;
}

WitnessJudgement judge_witness(const json& body, double runtime_ms) {
  using Kind = WitnessJudgement::Kind;
  if (std::string m = text_of(body, "mismatch"); !m.empty())
    return {Kind::kFail, "outputs on inputs the candidate had not seen differ from the reference: " + m};
  if (std::string r = text_of(body, "runner_error"); !r.empty())
    return {Kind::kFail, "the witness could not run the candidate: " + r};
  if (std::string r = text_of(body, "reference_error"); !r.empty())
    return {Kind::kReferenceFailed, "the witness's reference runner failed before any candidate code ran: " + r};
  auto witnessed = body.find("witnessed");
  if (witnessed == body.end() || !witnessed->is_boolean() || !witnessed->get<bool>()) {
    std::string why = text_of(body, "reason");
    return {Kind::kNotWitnessed, why.empty() ? "the witness gave no reason" : why};
  }
  auto number = [&body](const char* key) {
    auto it = body.find(key);
    return it != body.end() && it->is_number() && std::isfinite(it->get<double>()) ? it->get<double>() : NAN;
  };
  const double cand = number("candidate_min_ms"), ref_witnessed = number("reference_min_ms");
  double ref = NAN;
  if (auto st = body.find("ref_runtime_stats");
      st != body.end() && st->is_object() && st->contains("min") && (*st)["min"].is_number())
    ref = (*st)["min"].get<double>();
  // The reference's calls in the rounds, timed by the witness, when fewer were slowed by the host.
  if (const double in_rounds = number("ref_call_min_ms"); !std::isnan(in_rounds) && !std::isnan(ref))
    ref = std::min(ref, in_rounds);
  if (std::isnan(cand) || std::isnan(ref_witnessed) || std::isnan(ref))
    return {Kind::kFail, "the witness's result lacks its figures"};
  if (!(runtime_ms > 0)) return {Kind::kFail, "the candidate was not timed by its own process"};
  const double estimate = std::max(0.0, cand - ref_witnessed + ref);
  // How far this host moved the reference runner's rounds (median less best), before any candidate
  // code ran: the same load may fall on the candidate's rounds alone. It widens the test below,
  // never the floor of the counted time: on a noisy host an honest figure may be counted too long,
  // and no figure too short.
  const double ref_median = number("reference_ms");
  const double slack = std::max(kWitnessSlackMs, std::isnan(ref_median) ? 0.0 : ref_median - ref_witnessed);
  if (kWitnessRatio * runtime_ms + slack < estimate)
    return {Kind::kFail,
            fmt::format("the candidate's own timing ({:.4g} ms) is far below what the witness measured "
                        "from outside its process: at best {:.4g} ms a call, against {:.4g} ms for the "
                        "reference runner whose reference takes {:.4g} ms, an estimate of {:.4g} ms (slack {:.4g} ms)",
                        runtime_ms, cand, ref_witnessed, ref, estimate, slack),
            0,
            slack,
            -1.0,
            /*by_timing=*/true};
  const double ref_ms = number("ref_runtime_ms");
  return {Kind::kPass, "", std::max(runtime_ms, estimate - kWitnessSlackMs), slack, std::isnan(ref_ms) ? -1.0 : ref_ms};
}

}  // namespace ak::kernelbench
