#pragma once
// TLS material for gRPC channels and servers, and the names rules shared by `certs init`,
// the server's start-up check and the agent link's identity check.
//
// Layout of a TLS directory (what `gpusched certs init DIR` writes; issue 35, one bundle per
// party, so that a machine holds only its own key):
//   DIR/ca/ca.crt, ca.key       the cluster CA (the key 0600; it stays on the admin's machine)
//   DIR/server/                 the servers' bundle (`server --tls-dir DIR/server`):
//     ca.crt                    the CA's certificate
//     server.crt, server.key    the servers' certificate (serverAuth only: never a client, so
//                               never a node; names the --server-host names, localhost and
//                               127.0.0.1)
//     log-reader.crt, .key      the servers' client identity for reading agents' logs
//                               (clientAuth only, names kServerCertName, which no node may be)
//   DIR/nodes/NAME/             node NAME's bundle (`agent --tls-dir DIR/nodes/NAME`):
//     ca.crt, NAME.crt, NAME.key  (clientAuth and serverAuth, CN=NAME, DNS:NAME)
// Servers and agents also read the older flat layout (ca.crt, server.crt/.key and NAME.crt/
// .key in one folder), and a --tls-dir naming the top DIR finds its bundle in it.

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpusched::rpc {

// Every server certificate also names this (a DNS SAN), and no node may be called so: an
// agent's log service admits only peers whose certificate names it, i.e. the servers.
inline constexpr const char* kServerCertName = "gpusched-server";

// PEM text of a client's TLS set-up. An empty ca_pem means plaintext. cert_pem and key_pem
// are both set (a client certificate, as agents present) or both empty (CLI users).
struct ClientTls {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  // The name the peer's certificate must carry, when it is not the host of the address
  // dialled (the server reads an agent's logs at its address; the certificate names the node).
  std::string server_name;
  bool enabled() const { return !ca_pem.empty(); }
};

// A server's TLS set-up, read from a TLS directory.
struct ServerTls {
  std::string ca_pem, cert_pem, key_pem;
  std::string cert_file, key_file;  // paths, for cpp-httplib's SSLServer
};

// Reads a PEM file; the error names `field` and the path (missing, unreadable, not PEM).
StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& field);

// ca_file (trusted), and cert_file/key_file when both are non-empty.
StatusOr<ClientTls> LoadClientTls(const std::string& ca_file, const std::string& cert_file = "",
                                  const std::string& key_file = "");
// The files of the layout's servers' client identity: DIR/server/log-reader.crt and .key.
inline constexpr const char* kLogReaderFile = "log-reader";
// DIR/server and DIR/nodes/NAME: where certs init puts each bundle.
std::string ServerBundleDir(const std::string& dir);
std::string NodeBundleDir(const std::string& dir, const std::string& name);

// Agent NAME's material in `dir` (its bundle, or a top DIR holding nodes/NAME/, or the flat
// layout): NAME.crt, NAME.key and ca.crt.
StatusOr<ClientTls> LoadAgentTls(const std::string& dir, const std::string& name);
// server.crt, server.key and ca.crt in `dir` (the servers' bundle, or a top DIR holding
// server/, or the flat layout).
StatusOr<ServerTls> LoadServerTls(const std::string& dir);
// What a server presents to agents' log services: log-reader.crt/.key of its bundle, or in
// the flat layout (no log reader) server.crt/.key; and ca.crt.
StatusOr<ClientTls> LoadLogReaderTls(const std::string& dir);

// Whether `host` (of HOST:PORT, brackets allowed for IPv6) can only be reached from this
// machine: localhost, 127.0.0.0/8, ::1. "0.0.0.0", "::", "" (every address) and every other
// name or address are not.
bool IsLoopbackHost(std::string_view host);
// The host part of "HOST:PORT" ("[::1]:80" -> "::1"); the whole text when there is no port.
std::string HostOf(std::string_view address);

// A node's name (agent --name, registration): 1-253 of [A-Za-z0-9._-] (a host name fits), not
// starting with '.' or '-'. InvalidArgument naming `field` and the value otherwise. A node
// on TLS also needs CheckNodeCertName (certs init --agent).
Status CheckNodeName(std::string_view name, std::string_view field);
// A node name that can name a certificate and its files: 1-63 of [A-Za-z0-9._-], not
// starting with '.' or '-', and not "ca", "server" (their files are the CA's and the
// server's) or kServerCertName. InvalidArgument naming `field` and the value otherwise.
Status CheckNodeCertName(std::string_view name, std::string_view field);
// A host a server certificate can name: an IPv4 or IPv6 address, or a DNS name (labels of
// [A-Za-z0-9-], optionally a leading "*." wildcard). InvalidArgument naming `field` otherwise.
Status CheckServerHost(std::string_view host, std::string_view field);
// Whether `host` is an IPv4 or IPv6 address (certificates name those as IP SANs).
bool IsIpAddress(std::string_view host);

// Whether an authenticated peer whose certificate carries `names` (CN and SANs) may act as
// node `node`: an exact match of one of them.
bool CertificateNamesNode(const std::vector<std::string>& names, std::string_view node);

}  // namespace gpusched::rpc
