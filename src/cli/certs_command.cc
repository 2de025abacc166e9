// `gpusched certs init DIR [--server-host H]... [--agent NAME]...`: the files a cluster needs
// for TLS (certs.h, layout in rpc/tls.h): a CA kept apart in DIR/ca, the servers' bundle in
// DIR/server and one bundle per node in DIR/nodes/NAME. Prints what it created and what it
// kept; run it again with another --agent to add a node.

#include <iostream>
#include <memory>

#include "cli/certs.h"
#include "cli/client.h"
#include "cli/commands.h"

namespace gpusched::cli {

void RegisterCerts(CLI::App& app) {
  CLI::App* certs = app.add_subcommand("certs", "TLS certificates for servers and agents");
  certs->require_subcommand(1);
  auto r = std::make_shared<CertsRequest>();
  CLI::App* init = certs->add_subcommand(
      "init",
      "Create (or complete) the CA (DIR/ca), the servers' bundle (DIR/server) and a bundle per "
      "node (DIR/nodes/NAME: ca.crt, NAME.crt, NAME.key)");
  init->add_option("DIR", r->dir, "Directory of the certificates and keys")->required();
  init->add_option("--server-host", r->server_hosts,
                   "A name or address clients and agents use for the server (repeat; "
                   "localhost and 127.0.0.1 are always included)");
  init->add_option("--agent", r->agents,
                   "An agent's node name (repeat): its bundle DIR/nodes/NAME");
  init->callback([r] {
    auto result = InitCerts(*r);
    if (!result.ok()) Fail(result.status());
    for (const std::string& p : result->created) std::cout << "created " << p << "\n";
    for (const std::string& p : result->kept) std::cout << "kept    " << p << "\n";
    for (const std::string& n : result->notes) std::cerr << "gpusched certs: note: " << n << "\n";
    std::cout << "server: copy " << r->dir << "/server/ to the servers; gpusched server "
              << "--tls-dir DIR/server ...\n"
              << "agent:  copy " << r->dir << "/nodes/NAME/ to node NAME only; gpusched agent "
              << "--tls-dir DIR/nodes/NAME --name NAME ...\n"
              << "CLI:    GPUSCHED_CA=" << r->dir << "/ca/ca.crt gpusched ...  (or --ca)\n"
              << "Keep " << r->dir << "/ca/ca.key on this machine only: it issues every "
              << "identity.\n";
  });
}

}  // namespace gpusched::cli
