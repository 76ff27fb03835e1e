#include "coordinator/auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

namespace ak {

namespace {

constexpr size_t kZ85KeyChars = 40;

bool valid_z85_key(const std::string& k) {
  if (k.size() != kZ85KeyChars) return false;
  std::array<uint8_t, 32> raw{};
  return zmq_z85_decode(raw.data(), k.c_str()) != nullptr;
}

// The first word of the first line that is neither blank nor a comment.
Result<std::string> first_key(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return Status::invalid("cannot read " + std::string(what) + " file " + path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string w;
    if (!(words >> w)) continue;
    // '#' is a Z85 character: a line is a comment only when its first word is not a key.
    if (w[0] == '#' && !valid_z85_key(w)) continue;
    if (!valid_z85_key(w))
      return Status::invalid(path + ": expected a " + what + " (40 characters of Z85), got '" + w.substr(0, 48) +
                             "'; autokernel keys generate NAME writes key files");
    return w;
  }
  return Status::invalid(path + " holds no " + std::string(what) + "; autokernel keys generate NAME writes key files");
}

}  // namespace

bool curve_available() { return zmq_has("curve") == 1; }

Result<CurveKeyPair> generate_curve_keypair() {
  char pub[41] = {}, sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0)
    return Status::unavailable(std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno()) +
                               "; this libzmq may be built without CURVE (libsodium)");
  return CurveKeyPair{pub, sec};
}

Result<CurveKeyPair> read_secret_key_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::invalid("cannot read secret key file " + path);
  if (st.st_mode & 077) {
    std::ostringstream mode;
    mode << std::oct << (st.st_mode & 0777);
    return Status::invalid("secret key file " + path + " may be read by others (mode " + mode.str() + "); chmod 600 " +
                           path);
  }
  auto secret = first_key(path, "secret key");
  if (!secret.ok()) return secret.status();
  char pub[41] = {};
  if (zmq_curve_public(pub, secret->c_str()) != 0)
    return Status::invalid("cannot derive the public key of " + path + ": " + zmq_strerror(zmq_errno()));
  return CurveKeyPair{pub, *secret};
}

Result<std::string> read_public_key_file(const std::string& path) { return first_key(path, "public key"); }

Status write_key_files(const std::string& dir, const std::string& name, const CurveKeyPair& keys) {
  if (name.empty() || name.find('/') != std::string::npos)
    return Status::invalid("key name '" + name + "' must be a plain file name");
  std::error_code ec;
  std::filesystem::create_directories(dir.empty() ? "." : dir, ec);
  if (ec) return Status::invalid("cannot create " + dir + ": " + ec.message());
  const std::string base = (dir.empty() ? "." : dir) + "/" + name;
  const std::string key_path = base + ".key", pub_path = base + ".pub";
  for (const auto& p : {key_path, pub_path})
    if (std::filesystem::exists(p)) return Status(StatusCode::kAlreadyExists, p + " exists; not overwritten");
  const int fd = ::open(key_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::invalid("cannot create " + key_path + ": " + std::strerror(errno));
  const std::string secret = "# autokernel CURVE secret key '" + name + "': keep it private (public key in " + name +
                             ".pub)\n" + keys.secret_z85 + "\n";
  const bool ok = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ::close(fd);
  if (!ok) return Status::invalid("cannot write " + key_path);
  std::ofstream pub(pub_path);
  pub << keys.public_z85 << " # " << name << "\n";
  if (!pub) return Status::invalid("cannot write " + pub_path);
  return {};
}

Result<AllowList> load_allow_list(const std::string& path, bool with_roles) {
  std::ifstream in(path);
  if (!in) return Status::invalid("cannot read allow-list " + path);
  AllowList list;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    // '#' is a Z85 character, so a comment is a word that starts with '#' after the key (or a
    // first word that is not a key).
    std::istringstream words(line);
    std::string key, role, extra;
    if (!(words >> key)) continue;
    if (key[0] == '#' && !valid_z85_key(key)) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    if (!valid_z85_key(key))
      return Status::invalid(where + "expected a public key (40 characters of Z85, a NAME.pub line), got '" +
                             key.substr(0, 48) + "'");
    ClientRole r = ClientRole::kSubmit;
    if (words >> role && role[0] != '#') {
      if (!with_roles) return Status::invalid(where + "the workers' allow-list takes no role, got '" + role + "'");
      if (role == "admin") {
        r = ClientRole::kAdmin;
      } else if (role != "submit") {
        return Status::invalid(where + "role '" + role + "' is neither submit nor admin");
      }
      if (words >> extra && extra[0] != '#')
        return Status::invalid(where + "unexpected '" + extra + "' after the role");
    }
    list.keys[key] = r;
  }
  return list;
}

bool is_loopback_address(const std::string& host_port) {
  std::string host = host_port;
  if (!host.empty() && host[0] == '[') {
    const auto close = host.find(']');
    if (close == std::string::npos) return false;
    host = host.substr(1, close - 1);
  } else if (auto colon = host.rfind(':'); colon != std::string::npos) {
    host.resize(colon);
  }
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

bool is_loopback_endpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  return is_loopback_address(endpoint.substr(6));
}

ZapHandler::ZapHandler(zmq::context_t& ctx, AllowList workers, AllowList clients)
    : socket_(ctx, zmq::socket_type::rep), workers_(std::move(workers)), clients_(std::move(clients)) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind("inproc://zeromq.zap.01");
}

std::optional<ZapHandler::Verdict> ZapHandler::answer_one() {
  std::vector<zmq::message_t> req;
  auto got = zmq::recv_multipart(socket_, std::back_inserter(req), zmq::recv_flags::dontwait);
  if (!got) return std::nullopt;
  // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
  Verdict v;
  std::string version, request_id, status = "400";
  if (req.size() >= 6) {
    version = req[0].to_string();
    request_id = req[1].to_string();
    v.domain = req[2].to_string();
    v.address = req[3].to_string();
    const std::string mechanism = req[5].to_string();
    const AllowList* list = v.domain == kWorkersZapDomain   ? &workers_
                            : v.domain == kClientsZapDomain ? &clients_
                                                            : nullptr;
    if (mechanism != "CURVE" || req.size() < 7 || req[6].size() != 32) {
      v.reason = "mechanism " + mechanism + " is not CURVE";
    } else {
      char z85[41] = {};
      zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
      v.key = z85;
      if (!list) {
        v.reason = "unknown ZAP domain '" + v.domain + "'";
      } else if (!list->keys.count(v.key)) {
        v.reason = "key " + v.key + " is not in the " + v.domain + "' allow-list";
      } else {
        v.allowed = true;
        status = "200";
      }
    }
  } else {
    v.reason = "malformed ZAP request";
  }
  const std::string status_text = v.allowed ? "OK" : "not allowed";
  const std::string user_id = v.allowed ? v.key : std::string();  // every message of the peer carries it
  std::array<zmq::const_buffer, 6> reply = {zmq::buffer(std::string_view("1.0")),
                                            zmq::buffer(request_id),
                                            zmq::buffer(status),
                                            zmq::buffer(status_text),
                                            zmq::buffer(user_id),
                                            zmq::const_buffer(nullptr, 0)};
  try {
    zmq::send_multipart(socket_, reply);
  } catch (const zmq::error_t& e) {
    spdlog::error("ZAP reply failed: {}", e.what());
  }
  return v;
}

bool RefusalLog::refused(const std::string& peer, const std::string& reason, const std::string& detail,
                         int64_t now_ms) {
  const std::string key = peer.substr(0, 128);
  auto it = peers_.find(key);
  if (it != peers_.end() && now_ms - it->second.last_ms < interval_ms_) {
    ++it->second.held_back;
    return false;
  }
  if (peers_.size() >= 4096) {  // bounded: forget peers quiet for an interval
    std::erase_if(peers_, [&](const auto& kv) { return now_ms - kv.second.last_ms >= interval_ms_; });
    it = peers_.find(key);
  }
  Entry& e = it == peers_.end() ? peers_[key] : it->second;
  spdlog::warn("refused {} ({}): {}{}", key.substr(0, 64), reason, detail,
               e.held_back ? " (and " + std::to_string(e.held_back) + " more refusals of this peer since the last line)"
                           : std::string());
  e.last_ms = now_ms;
  e.held_back = 0;
  return true;
}

}  // namespace ak
