// Who may talk to the coordinator (issue 19; PROTOCOL.md, "Authentication").
//
// CURVE key files and allow-lists, the loopback rule for a coordinator without keys, the ZAP
// handler (ZeroMQ's RFC 27) that admits or refuses every CURVE handshake of the coordinator's
// sockets, and the log of refusals that says each peer's refusal at most once per interval.
//
// Keys are Z85 text (40 characters for 32 bytes). NAME.key holds the secret key, NAME.pub the
// public key; `autokernel keys generate NAME` writes both (the secret with mode 0600).
//
// An allow-list file has one key per line: `<public-z85> [role] [# comment]`; blank lines and
// lines whose first word starts with '#' and is not a key are skipped ('#' is a Z85 character, so
// a comment after the key must be separated from it by a blank). The workers' list takes no role; the clients' list
// takes `submit` (the default: submit, and read everything) or `admin` (also cancel any campaign and import tuning
// entries).
//
// Thread-safety: the free functions are thread-safe; a ZapHandler and a RefusalLog belong to the
// thread that runs the coordinator's poll loop.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "common/status.h"
#include "coordinator/farm_core.h"

namespace ak {

// The ZAP domains of the coordinator's two sockets (zmq::sockopt::zap_domain).
inline constexpr const char* kWorkersZapDomain = "workers";
inline constexpr const char* kClientsZapDomain = "clients";

struct CurveKeyPair {
  std::string public_z85;
  std::string secret_z85;
};

// True when this libzmq was built with CURVE (libsodium).
bool curve_available();
Result<CurveKeyPair> generate_curve_keypair();
// A secret key file (NAME.key); the public key is derived from it. The file should be readable
// by its owner only: a file that others may read is refused.
Result<CurveKeyPair> read_secret_key_file(const std::string& path);
// A public key file (NAME.pub): its first key.
Result<std::string> read_public_key_file(const std::string& path);
// Writes DIR/NAME.key (mode 0600) and DIR/NAME.pub; refuses to overwrite either.
Status write_key_files(const std::string& dir, const std::string& name, const CurveKeyPair& keys);

struct AllowList {
  std::map<std::string, ClientRole> keys;  // public key (Z85) -> role (kSubmit for workers)
};
// `with_roles` false: the workers' list (a role is an error).
Result<AllowList> load_allow_list(const std::string& path, bool with_roles);

// True for endpoints only this host can reach: tcp:// on 127.0.0.0/8, localhost or [::1], and
// ipc:// and inproc://. False for tcp://*, 0.0.0.0, any other address or host name.
bool is_loopback_endpoint(const std::string& endpoint);
// The same for a "host:port" address (the /metrics bind address).
bool is_loopback_address(const std::string& host_port);

// Answers the ZAP requests of every CURVE socket in its context: a key in the allow-list of the
// socket's domain is admitted with the key (Z85) as its User-Id, which every message from that
// peer then carries (zmq_msg_gets(msg, "User-Id")); anything else is refused and the handshake
// fails, so an unlisted peer never gets a frame through.
class ZapHandler {
 public:
  // Binds inproc://zeromq.zap.01 in `ctx`. Must exist before the CURVE sockets bind. Throws
  // zmq::error_t when the address is taken (another handler in this context).
  ZapHandler(zmq::context_t& ctx, AllowList workers, AllowList clients);
  zmq::socket_t& socket() { return socket_; }

  struct Verdict {
    bool allowed = false;
    std::string domain;   // kWorkersZapDomain, kClientsZapDomain or what the socket sent
    std::string address;  // the peer's IP address
    std::string key;      // Z85 public key it presented ("" when not CURVE)
    std::string reason;   // why it was refused
  };
  // Answers one waiting request without blocking; nullopt when none waits.
  std::optional<Verdict> answer_one();

 private:
  zmq::socket_t socket_;
  AllowList workers_;
  AllowList clients_;
};

// Refusals logged at most once per peer per interval: a rogue peer that sends thousands of frames
// gets one warning line per interval (saying how many were held back), not one per frame.
class RefusalLog {
 public:
  explicit RefusalLog(int64_t interval_ms = 10'000) : interval_ms_(interval_ms) {}
  // Returns whether it logged.
  bool refused(const std::string& peer, const std::string& reason, const std::string& detail, int64_t now_ms);

 private:
  struct Entry {
    int64_t last_ms = 0;
    int64_t held_back = 0;
  };
  int64_t interval_ms_;
  std::map<std::string, Entry> peers_;
};

}  // namespace ak
