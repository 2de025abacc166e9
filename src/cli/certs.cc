#include "cli/certs.h"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "rpc/tls.h"

namespace gpusched::cli {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// Writes PEM through `write` into a new file `path` of `mode`; never replaces a file.
template <typename WriteFn>
Status WriteNewPem(const std::string& path, mode_t mode, WriteFn write) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    if (errno == EEXIST) return AlreadyExists(path + " exists: not overwritten");
    return Internal("cannot create " + path + ": " + std::strerror(errno));
  }
  fchmod(fd, mode);  // the umask may only narrow it; say exactly what it is
  FILE* f = fdopen(fd, "w");
  if (f == nullptr) {
    close(fd);
    return Internal("cannot write " + path + ": " + std::strerror(errno));
  }
  const bool ok = write(f) == 1 && fflush(f) == 0 && fsync(fileno(f)) == 0;
  const std::string why = ok ? "" : OpenSslError();
  fclose(f);
  if (!ok) {
    unlink(path.c_str());
    return Internal("cannot write " + path + ": " + why);
  }
  return Status::Ok();
}

Status WriteKey(const std::string& path, EVP_PKEY* key) {
  return WriteNewPem(path, 0600, [key](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

Status WriteCert(const std::string& path, X509* cert) {
  return WriteNewPem(path, 0644, [cert](FILE* f) { return PEM_write_X509(f, cert); });
}

StatusOr<Key> ReadKey(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return InvalidArgument("cannot read " + path + ": " + std::strerror(errno));
  Key k(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!k) return InvalidArgument(path + " is not a PEM private key: " + OpenSslError());
  return k;
}

StatusOr<Cert> ReadCert(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return InvalidArgument("cannot read " + path + ": " + std::strerror(errno));
  Cert c(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!c) return InvalidArgument(path + " is not a PEM certificate: " + OpenSslError());
  return c;
}

StatusOr<Key> NewKey() {
  Key k(EVP_EC_gen("P-256"));
  if (!k) return Internal("cannot generate an EC P-256 key: " + OpenSslError());
  return k;
}

Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr) {
    return Internal(std::string("certificate extension ") + OBJ_nid2sn(nid) + "=" + value +
                    ": " + OpenSslError());
  }
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return Internal("cannot add a certificate extension: " + OpenSslError());
  return Status::Ok();
}

struct Profile {
  std::string common_name;
  std::string san;  // "DNS:a,IP:1.2.3.4"; "" = none
  bool ca = false;
  std::string extended_usage;  // serverAuth, clientAuth; "" for the CA
  int days = kLeafDays;
};

// Issues a certificate for `key` as `p` describes, signed by issuer/issuer_key (nullptr:
// self-signed, the CA).
StatusOr<Cert> Issue(const Profile& p, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key) {
  Cert cert(X509_new());
  if (!cert) return Internal("X509_new: " + OpenSslError());
  X509* x = cert.get();
  X509_set_version(x, 2);  // v3
  // A random positive serial of 159 bits (RFC 5280: at most 20 octets).
  BIGNUM* serial = BN_new();
  const bool serial_ok = serial != nullptr && BN_rand(serial, 159, BN_RAND_TOP_ANY,
                                                      BN_RAND_BOTTOM_ANY) == 1 &&
                         BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) != nullptr;
  BN_free(serial);
  if (!serial_ok) return Internal("certificate serial: " + OpenSslError());
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), static_cast<long>(p.days) * 24 * 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gpusched"), -1, -1, 0);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(p.common_name.c_str()),
                                 -1, -1, 0) != 1) {
    return Internal("certificate name \"" + p.common_name + "\": " + OpenSslError());
  }
  X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : x, x, nullptr, nullptr, 0);
  GS_RETURN_IF_ERROR(AddExtension(x, &ctx, NID_basic_constraints,
                                  p.ca ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE"));
  GS_RETURN_IF_ERROR(AddExtension(x, &ctx, NID_key_usage,
                                  p.ca ? "critical,keyCertSign,cRLSign"
                                       : "critical,digitalSignature"));
  if (!p.extended_usage.empty()) {
    GS_RETURN_IF_ERROR(AddExtension(x, &ctx, NID_ext_key_usage, p.extended_usage));
  }
  GS_RETURN_IF_ERROR(AddExtension(x, &ctx, NID_subject_key_identifier, "hash"));
  if (issuer != nullptr) {
    GS_RETURN_IF_ERROR(AddExtension(x, &ctx, NID_authority_key_identifier, "keyid:always"));
  }
  if (!p.san.empty()) GS_RETURN_IF_ERROR(AddExtension(x, &ctx, NID_subject_alt_name, p.san));
  if (X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) <= 0) {
    return Internal("cannot sign the certificate for " + p.common_name + ": " + OpenSslError());
  }
  return cert;
}

// Whether path.crt and path.key are both there (true), both missing (false), or only one
// (an error naming both: never replaced).
StatusOr<bool> PairExists(const std::string& crt, const std::string& key) {
  const bool c = Exists(crt), k = Exists(key);
  if (c == k) return c;
  return FailedPrecondition((c ? crt : key) + " exists but " + (c ? key : crt) +
                            " does not: restore it, or remove " + (c ? crt : key) +
                            " to issue a new pair (nothing was changed)");
}

// An existing pair must hold together and come from the CA.
Status CheckPair(const std::string& crt_path, const std::string& key_path, X509* ca) {
  GS_ASSIGN_OR_RETURN(Cert crt, ReadCert(crt_path));
  GS_ASSIGN_OR_RETURN(Key key, ReadKey(key_path));
  if (X509_check_private_key(crt.get(), key.get()) != 1) {
    ERR_clear_error();
    return FailedPrecondition(key_path + " is not the key of " + crt_path);
  }
  if (ca != nullptr && X509_verify(crt.get(), X509_get0_pubkey(ca)) != 1) {
    ERR_clear_error();
    return FailedPrecondition(crt_path + " was not issued by the CA in this directory");
  }
  return Status::Ok();
}

// The server certificate's names: every requested host, localhost and 127.0.0.1. Not
// kServerCertName: that is the log reader's (a client identity the server certificate lacks).
std::string ServerSan(const std::vector<std::string>& hosts) {
  std::vector<std::string> all = hosts;
  all.push_back("localhost");
  all.push_back("127.0.0.1");
  std::vector<std::string> seen;
  std::string san;
  for (const std::string& h : all) {
    if (std::find(seen.begin(), seen.end(), h) != seen.end()) continue;
    seen.push_back(h);
    san += (san.empty() ? "" : ",") + std::string(rpc::IsIpAddress(h) ? "IP:" : "DNS:") + h;
  }
  return san;
}

// Hosts of `wanted` that `crt_path` does not name (a kept server certificate).
std::vector<std::string> MissingHosts(const std::string& crt_path,
                                      const std::vector<std::string>& wanted) {
  std::vector<std::string> missing;
  auto crt = ReadCert(crt_path);
  if (!crt.ok()) return missing;
  for (const std::string& h : wanted) {
    const int named = rpc::IsIpAddress(h)
                          ? X509_check_ip_asc(crt->get(), h.c_str(), 0)
                          : X509_check_host(crt->get(), h.c_str(), h.size(), 0, nullptr);
    if (named != 1) missing.push_back(h);
  }
  return missing;
}

struct Leaf {
  std::string crt, key;
  Profile profile;
};

// Creates `dir` (0700) unless it is there.
Status MakePrivateDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) {
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec)) return Status::Ok();
    return InvalidArgument("DIR: " + dir + " is not a directory");
  }
  return InvalidArgument("DIR: cannot create " + dir + ": " + std::strerror(errno));
}

// Writes the CA certificate into a bundle unless it holds one already.
Status CopyCaInto(const std::string& path, X509* ca, CertsResult& out) {
  if (Exists(path)) return Status::Ok();
  GS_RETURN_IF_ERROR(WriteCert(path, ca));
  out.created.push_back(path);
  return Status::Ok();
}

// The leaves of the layout (rpc/tls.h): the server's certificate (serverAuth only), its log
// reader's (clientAuth only, naming kServerCertName) and one per node, each in its folder.
std::vector<Leaf> LeavesOf(const CertsRequest& r) {
  const std::string server_dir = rpc::ServerBundleDir(r.dir);
  std::vector<Leaf> leaves;
  Leaf server{server_dir + "/server.crt", server_dir + "/server.key", {}};
  server.profile.common_name = r.server_hosts.empty() ? "gpusched-server" : r.server_hosts[0];
  server.profile.san = ServerSan(r.server_hosts);
  server.profile.extended_usage = "serverAuth";  // never a client: it cannot act as a node
  leaves.push_back(server);
  Leaf reader{server_dir + "/" + rpc::kLogReaderFile + ".crt",
              server_dir + "/" + rpc::kLogReaderFile + ".key", {}};
  reader.profile.common_name = rpc::kServerCertName;
  reader.profile.san = std::string("DNS:") + rpc::kServerCertName;
  reader.profile.extended_usage = "clientAuth";  // reads agents' logs, serves nothing
  leaves.push_back(reader);
  for (const std::string& a : r.agents) {
    const std::string dir = rpc::NodeBundleDir(r.dir, a);
    Leaf l{dir + "/" + a + ".crt", dir + "/" + a + ".key", {}};
    l.profile.common_name = a;
    l.profile.san = "DNS:" + a;
    // serverAuth too: the agent serves its task logs to the server over TLS.
    l.profile.extended_usage = "clientAuth,serverAuth";
    leaves.push_back(l);
  }
  return leaves;
}

// Refuses the single-directory layout of earlier versions (every key in one folder).
Status RefuseFlatLayout(const std::string& dir) {
  for (const char* f : {"/ca.key", "/server.key"}) {
    if (!Exists(dir + f)) continue;
    return FailedPrecondition(
        dir + f + " exists: " + dir + " has the old layout, one folder holding the CA key, "
        "the server key and every agent's key. `certs init` now writes a bundle per node ("
        "DIR/nodes/NAME/) and keeps the CA key apart (DIR/ca/): run it on a new directory and "
        "copy each node only its bundle (servers and agents still read the old layout)");
  }
  return Status::Ok();
}

struct Ca {
  Cert cert;
  Key key;
};

// The CA of DIR/ca/: read when `have`, created otherwise.
StatusOr<Ca> LoadOrCreateCa(const std::string& crt_path, const std::string& key_path, bool have,
                            CertsResult& out) {
  Ca ca;
  if (have) {
    GS_ASSIGN_OR_RETURN(ca.cert, ReadCert(crt_path));
    GS_ASSIGN_OR_RETURN(ca.key, ReadKey(key_path));
    if (X509_check_private_key(ca.cert.get(), ca.key.get()) != 1) {
      ERR_clear_error();
      return FailedPrecondition(key_path + " is not the key of " + crt_path);
    }
    out.kept.push_back(crt_path);
    return ca;
  }
  Profile p;
  p.common_name = "gpusched cluster CA";
  p.ca = true;
  p.days = kCaDays;
  GS_ASSIGN_OR_RETURN(ca.key, NewKey());
  GS_ASSIGN_OR_RETURN(ca.cert, Issue(p, ca.key.get(), nullptr, nullptr));
  GS_RETURN_IF_ERROR(WriteKey(key_path, ca.key.get()));
  GS_RETURN_IF_ERROR(WriteCert(crt_path, ca.cert.get()));
  out.created.push_back(key_path);
  out.created.push_back(crt_path);
  return ca;
}

// Keeps a leaf that is there (checked against the CA), issues one that is not.
Status KeepOrIssue(const Leaf& l, bool have, bool is_server, const CertsRequest& r, Ca& ca,
                   CertsResult& out) {
  if (have) {
    GS_RETURN_IF_ERROR(CheckPair(l.crt, l.key, ca.cert.get()));
    out.kept.push_back(l.crt);
    if (!is_server) return Status::Ok();
    const std::vector<std::string> missing = MissingHosts(l.crt, r.server_hosts);
    if (!missing.empty()) {
      std::string list;
      for (const std::string& h : missing) list += (list.empty() ? "" : ", ") + h;
      out.notes.push_back(l.crt + " exists and does not name " + list +
                          ": it was kept; remove server.crt and server.key and run "
                          "again to issue one that does");
    }
    return Status::Ok();
  }
  GS_ASSIGN_OR_RETURN(Key key, NewKey());
  GS_ASSIGN_OR_RETURN(Cert crt, Issue(l.profile, key.get(), ca.cert.get(), ca.key.get()));
  GS_RETURN_IF_ERROR(WriteKey(l.key, key.get()));
  GS_RETURN_IF_ERROR(WriteCert(l.crt, crt.get()));
  out.created.push_back(l.key);
  out.created.push_back(l.crt);
  return Status::Ok();
}

// DIR itself and the folders of the layout, 0700 where created.
Status MakeLayout(const CertsRequest& r) {
  const std::string& dir = r.dir;
  std::error_code ec;
  const bool created_dir = !std::filesystem::exists(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument("DIR: cannot create " + dir + ": " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) {
    return InvalidArgument("DIR: " + dir + " is not a directory");
  }
  if (created_dir) chmod(dir.c_str(), 0700);
  GS_RETURN_IF_ERROR(RefuseFlatLayout(dir));
  GS_RETURN_IF_ERROR(MakePrivateDir(dir + "/ca"));
  GS_RETURN_IF_ERROR(MakePrivateDir(rpc::ServerBundleDir(dir)));
  if (!r.agents.empty()) GS_RETURN_IF_ERROR(MakePrivateDir(dir + "/nodes"));
  for (const std::string& a : r.agents) {
    GS_RETURN_IF_ERROR(MakePrivateDir(rpc::NodeBundleDir(dir, a)));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<CertsResult> InitCerts(const CertsRequest& r) {
  if (r.dir.empty()) return InvalidArgument("DIR: empty");
  for (const std::string& h : r.server_hosts) {
    GS_RETURN_IF_ERROR(rpc::CheckServerHost(h, "--server-host"));
  }
  for (const std::string& a : r.agents) GS_RETURN_IF_ERROR(rpc::CheckNodeCertName(a, "--agent"));
  GS_RETURN_IF_ERROR(MakeLayout(r));
  const std::string ca_crt = r.dir + "/ca/ca.crt", ca_key = r.dir + "/ca/ca.key";
  const std::vector<Leaf> leaves = LeavesOf(r);
  // Every pair is checked before anything is written: a half pair stops the run unchanged.
  GS_ASSIGN_OR_RETURN(const bool have_ca, PairExists(ca_crt, ca_key));
  std::vector<bool> have(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    GS_ASSIGN_OR_RETURN(bool h, PairExists(leaves[i].crt, leaves[i].key));
    have[i] = h;
  }
  CertsResult out;
  GS_ASSIGN_OR_RETURN(Ca ca, LoadOrCreateCa(ca_crt, ca_key, have_ca, out));
  for (size_t i = 0; i < leaves.size(); ++i) {
    GS_RETURN_IF_ERROR(KeepOrIssue(leaves[i], have[i], i == 0, r, ca, out));
  }
  // Each bundle trusts the CA: its certificate, never its key.
  GS_RETURN_IF_ERROR(CopyCaInto(rpc::ServerBundleDir(r.dir) + "/ca.crt", ca.cert.get(), out));
  for (const std::string& a : r.agents) {
    GS_RETURN_IF_ERROR(CopyCaInto(rpc::NodeBundleDir(r.dir, a) + "/ca.crt", ca.cert.get(), out));
  }
  return out;
}

}  // namespace gpusched::cli
