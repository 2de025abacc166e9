#include "rpc/tls.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "base/host_port.h"

namespace gpusched::rpc {

StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument(field + ": cannot read " + path +
                           " (create it with `gpusched certs init DIR`)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.find("-----BEGIN ") == std::string::npos) {
    return InvalidArgument(field + ": " + path + " is not a PEM file");
  }
  return text;
}

StatusOr<ClientTls> LoadClientTls(const std::string& ca_file, const std::string& cert_file,
                                  const std::string& key_file) {
  ClientTls t;
  GS_ASSIGN_OR_RETURN(t.ca_pem, ReadPemFile(ca_file, "ca"));
  if (!cert_file.empty() || !key_file.empty()) {
    GS_ASSIGN_OR_RETURN(t.cert_pem, ReadPemFile(cert_file, "certificate"));
    GS_ASSIGN_OR_RETURN(t.key_pem, ReadPemFile(key_file, "key"));
  }
  return t;
}

namespace {

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// `dir` itself when it holds `file`; else `bundle` when that does (a top DIR was given).
std::string BundleOf(const std::string& dir, const std::string& bundle, const std::string& file) {
  if (!IsFile(dir + "/" + file) && IsFile(bundle + "/" + file)) return bundle;
  return dir;
}

}  // namespace

std::string ServerBundleDir(const std::string& dir) { return dir + "/server"; }
std::string NodeBundleDir(const std::string& dir, const std::string& name) {
  return dir + "/nodes/" + name;
}

StatusOr<ClientTls> LoadAgentTls(const std::string& top, const std::string& name) {
  GS_RETURN_IF_ERROR(CheckNodeCertName(name, "name"));
  const std::string dir = BundleOf(top, NodeBundleDir(top, name), name + ".crt");
  return LoadClientTls(dir + "/ca.crt", dir + "/" + name + ".crt", dir + "/" + name + ".key");
}

StatusOr<ClientTls> LoadLogReaderTls(const std::string& top) {
  const std::string dir = BundleOf(top, ServerBundleDir(top), "server.crt");
  const std::string reader = dir + "/" + kLogReaderFile;
  if (IsFile(reader + ".crt")) {
    return LoadClientTls(dir + "/ca.crt", reader + ".crt", reader + ".key");
  }
  return LoadClientTls(dir + "/ca.crt", dir + "/server.crt", dir + "/server.key");
}

StatusOr<ServerTls> LoadServerTls(const std::string& top) {
  const std::string dir = BundleOf(top, ServerBundleDir(top), "server.crt");
  ServerTls t;
  t.cert_file = dir + "/server.crt";
  t.key_file = dir + "/server.key";
  GS_ASSIGN_OR_RETURN(t.ca_pem, ReadPemFile(dir + "/ca.crt", "tls_dir"));
  GS_ASSIGN_OR_RETURN(t.cert_pem, ReadPemFile(t.cert_file, "tls_dir"));
  GS_ASSIGN_OR_RETURN(t.key_pem, ReadPemFile(t.key_file, "tls_dir"));
  return t;
}

std::string HostOf(std::string_view address) {
  if (auto hp = ParseHostPort(address, "address", /*allow_empty_host=*/true); hp.ok()) {
    return hp->host;
  }
  // Not HOST:PORT: a host alone ("host", a bare IPv6 "::1", "[::1]").
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  return std::string(address);
}

bool IsIpAddress(std::string_view host) {
  if (host.find('\0') != std::string_view::npos) return false;
  const std::string h(host);
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

bool IsLoopbackHost(std::string_view host) {
  if (!host.empty() && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  if (host.find('\0') != std::string_view::npos) return false;
  const std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '.' || c == '_';
}

// 1 to `max` of NameChar, not starting with '.' or '-'.
Status CheckNameOfAtMost(std::string_view name, std::string_view field, size_t max) {
  const std::string quoted = std::string(field) + ": \"" + std::string(name) + "\"";
  if (name.empty() || name.size() > max) {
    return InvalidArgument(quoted + " must be 1 to " + std::to_string(max) + " characters");
  }
  for (char c : name) {
    if (!NameChar(c)) {
      return InvalidArgument(quoted + " may only hold letters, digits, '.', '-' and '_'");
    }
  }
  if (name.front() == '.' || name.front() == '-') {
    return InvalidArgument(quoted + " must not start with '.' or '-'");
  }
  return Status::Ok();
}

}  // namespace

Status CheckNodeName(std::string_view name, std::string_view field) {
  return CheckNameOfAtMost(name, field, 253);
}

Status CheckNodeCertName(std::string_view name, std::string_view field) {
  GS_RETURN_IF_ERROR(CheckNameOfAtMost(name, field, 63));
  const std::string quoted = std::string(field) + ": \"" + std::string(name) + "\"";
  if (name == "ca" || name == "server" || name == kServerCertName) {
    return InvalidArgument(quoted + " is reserved (the CA's or the server's name)");
  }
  return Status::Ok();
}

Status CheckServerHost(std::string_view host, std::string_view field) {
  if (IsIpAddress(host)) return Status::Ok();
  const std::string quoted = std::string(field) + ": \"" + std::string(host) + "\"";
  std::string_view rest = host;
  if (rest.substr(0, 2) == "*.") rest.remove_prefix(2);
  if (rest.empty() || rest.size() > 253) {
    return InvalidArgument(quoted + " is neither an IP address nor a DNS name");
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t dot = rest.find('.', start);
    if (dot == std::string_view::npos) dot = rest.size();
    const std::string_view label = rest.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return InvalidArgument(quoted + " is neither an IP address nor a DNS name");
    }
    for (char c : label) {
      if (!NameChar(c) || c == '.' || c == '_') {
        return InvalidArgument(quoted + " is neither an IP address nor a DNS name");
      }
    }
    start = dot + 1;
  }
  return Status::Ok();
}

bool CertificateNamesNode(const std::vector<std::string>& names, std::string_view node) {
  if (node.empty()) return false;
  for (const std::string& n : names) {
    if (n == node) return true;
  }
  return false;
}

}  // namespace gpusched::rpc
