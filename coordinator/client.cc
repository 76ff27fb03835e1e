#include "coordinator/client.h"

namespace ak {

CoordinatorClient::CoordinatorClient(std::string endpoint, std::chrono::milliseconds timeout, CurveClientKeys keys)
    : endpoint_(std::move(endpoint)), timeout_(timeout), keys_(std::move(keys)), ctx_(1) {
  reconnect();
}

void CoordinatorClient::reconnect() {
  sock_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::req);
  sock_->set(zmq::sockopt::linger, 0);
  if (!keys_.server_key.empty()) {
    sock_->set(zmq::sockopt::curve_serverkey, keys_.server_key);
    sock_->set(zmq::sockopt::curve_publickey, keys_.public_key);
    sock_->set(zmq::sockopt::curve_secretkey, keys_.secret_key);
  }
  sock_->connect(endpoint_);
}

Result<nlohmann::json> CoordinatorClient::request(const protocol::Message& m, std::chrono::milliseconds extra_wait) {
  try {
    const std::string frame = protocol::encode(m);
    // Refused here rather than by the coordinator: a frame past its hard cap would be dropped
    // with the connection, and the CLI would only see a timeout.
    if (frame.size() > protocol::kMaxFrameBytes)
      return Status::invalid("request of " + std::to_string(frame.size()) +
                             " bytes exceeds the coordinator's limit of " + std::to_string(protocol::kMaxFrameBytes) +
                             " bytes (common/PROTOCOL.md, \"Limits\"); send a smaller source");
    sock_->send(zmq::buffer(frame), zmq::send_flags::none);
    zmq::pollitem_t item{sock_->handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout_ + extra_wait);
    if (!(item.revents & ZMQ_POLLIN)) {
      reconnect();
      return Status::timed_out("no reply from the coordinator at " + endpoint_ + " within " +
                               std::to_string(timeout_.count()) + " ms; is it running? (autokernel coordinator)" +
                               (keys_.server_key.empty()
                                    ? std::string("; a coordinator with CURVE keys answers only clients with keys "
                                                  "(--key, --coordinator-key)")
                                    : std::string("; is this client's public key in its --allow-clients list, and "
                                                  "--coordinator-key its public key?")));
    }
    zmq::message_t reply;
    (void)sock_->recv(reply, zmq::recv_flags::none);
    auto d = protocol::decode(reply.to_string_view(), size_t{1} << 30);
    if (!d.ok()) return Status::internal("coordinator sent an unreadable reply: " + d.error.message);
    if (auto* e = std::get_if<protocol::Error>(&*d.message))
      return Status::invalid(std::string(protocol::error_code_name(e->code)) + ": " + e->message);
    if (auto* r = std::get_if<protocol::Reply>(&*d.message)) return r->body;
    return Status::internal(std::string("unexpected reply type ") + protocol::type_name(*d.message));
  } catch (const zmq::error_t& e) {
    reconnect();
    return Status::unavailable("client socket to " + endpoint_ + ": " + e.what());
  }
}

template <typename T>
Result<T> CoordinatorClient::typed(const protocol::Message& m, std::chrono::milliseconds extra_wait) {
  auto body = request(m, extra_wait);
  if (!body.ok()) return body.status();
  return protocol::parse_reply<T>(*body);
}

Result<protocol::SubmitReply> CoordinatorClient::submit(const nlohmann::json& campaign) {
  return typed<protocol::SubmitReply>(protocol::Submit{campaign});
}
Result<protocol::StatusReply> CoordinatorClient::status() {
  return typed<protocol::StatusReply>(protocol::StatusQuery{});
}
Result<protocol::StatusReply> CoordinatorClient::status_after(int64_t after_version, std::chrono::milliseconds wait) {
  return typed<protocol::StatusReply>(protocol::StatusQuery{after_version, wait.count()}, wait);
}
Result<protocol::ResultsReply> CoordinatorClient::results(const std::string& campaign_id, const std::string& status) {
  return typed<protocol::ResultsReply>(protocol::ResultsQuery{campaign_id, status, "", "", ""});
}
Result<protocol::ResultsReply> CoordinatorClient::results(const protocol::ResultsQuery& q) {
  return typed<protocol::ResultsReply>(q);
}
Result<protocol::BestReply> CoordinatorClient::best(const TuningQuery& q) {
  return typed<protocol::BestReply>(protocol::BestQuery{q});
}
Result<protocol::ImportBestReply> CoordinatorClient::import_best(const nlohmann::json& document) {
  return typed<protocol::ImportBestReply>(protocol::ImportBest{document});
}
Result<protocol::CancelReply> CoordinatorClient::cancel(const std::string& campaign_id, const std::string& reason) {
  return typed<protocol::CancelReply>(protocol::Cancel{campaign_id, reason});
}

}  // namespace ak
