// autokernel keys: CURVE key pairs for the coordinator, workers and clients (coordinator/auth.h).
#include <iostream>

#include "cli/commands.h"
#include "coordinator/auth.h"

namespace ak::cli {

int keys_generate(const std::string& name, const std::string& dir) {
  auto keys = generate_curve_keypair();
  if (!keys.ok()) {
    std::cerr << "autokernel keys: " << keys.status().message() << "\n";
    return 1;
  }
  if (Status s = write_key_files(dir, name, *keys); !s.ok()) {
    std::cerr << "autokernel keys: " << s.message() << "\n";
    return 1;
  }
  const std::string base = (dir.empty() ? "." : dir) + "/" + name;
  std::cout << "wrote " << base << ".key (secret, mode 0600) and " << base << ".pub\n"
            << "public key: " << keys->public_z85 << "\n"
            << "add the .pub line to the coordinator's --allow-workers or --allow-clients file (clients: "
               "append 'admin' to allow cancelling any campaign and importing tuning entries)\n";
  return 0;
}

int load_client_keys(const std::string& key_file, const std::string& coordinator_key_file, ClientArgs* c) {
  if (key_file.empty() && coordinator_key_file.empty()) return 0;
  if (key_file.empty() || coordinator_key_file.empty()) {
    std::cerr << "autokernel: CURVE needs both --key (this client's NAME.key, or AK_CLIENT_KEY) and "
                 "--coordinator-key (the coordinator's NAME.pub, or AK_COORDINATOR_KEY)\n";
    return 2;
  }
  auto mine = read_secret_key_file(key_file);
  if (!mine.ok()) {
    std::cerr << "autokernel: " << mine.status().message() << "\n";
    return 2;
  }
  auto server = read_public_key_file(coordinator_key_file);
  if (!server.ok()) {
    std::cerr << "autokernel: " << server.status().message() << "\n";
    return 2;
  }
  c->curve = {*server, mine->public_z85, mine->secret_z85};
  return 0;
}

}  // namespace ak::cli
