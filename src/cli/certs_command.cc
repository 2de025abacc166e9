// `gpusched certs init DIR [--server-host H]... [--agent NAME]...`: the files a cluster needs
// for TLS (certs.h): a CA, the servers' key pair and one per agent. Prints what it created
// and what it kept; run it again with another --agent to add a node.

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
      "init", "Create (or complete) DIR/ca.crt, server.crt/key and NAME.crt/key per agent");
  init->add_option("DIR", r->dir, "Directory of the certificates and keys")->required();
  init->add_option("--server-host", r->server_hosts,
                   "A name or address clients and agents use for the server (repeat; "
                   "localhost and 127.0.0.1 are always included)");
  init->add_option("--agent", r->agents, "An agent's node name (repeat): NAME.crt and NAME.key");
  init->callback([r] {
    auto result = InitCerts(*r);
    if (!result.ok()) Fail(result.status());
    for (const std::string& p : result->created) std::cout << "created " << p << "\n";
    for (const std::string& p : result->kept) std::cout << "kept    " << p << "\n";
    for (const std::string& n : result->notes) std::cerr << "gpusched certs: note: " << n << "\n";
    std::cout << "server: gpusched server --tls-dir " << r->dir << " ...\n"
              << "agent:  gpusched agent --tls-dir " << r->dir << " --name NAME ...\n"
              << "CLI:    GPUSCHED_CA=" << r->dir << "/ca.crt gpusched ...  (or --ca)\n"
              << "Keep ca.key off the nodes once every certificate is issued.\n";
  });
}

}  // namespace gpusched::cli
