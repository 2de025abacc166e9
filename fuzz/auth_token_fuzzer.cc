// What a client sends to authenticate (server/tokens.h): the Authorization header
// (ParseBearer), the bearer token (ParseToken), a table lookup with it (TokenTable), and the
// user and team names of `token create` (CheckPrincipalName); then the stored token record
// (store::DecodeToken). Beyond "no crash": every refusal is Unauthenticated and never echoes
// the token; only the one real token authenticates; what decodes encodes back the same.

#include <string>

#include "fuzz/fuzz_check.h"
#include "server/tokens.h"
#include "store/record_codec.h"

namespace {

using namespace gpusched;

// One token the table knows, made once from fixed bytes (the fuzzer needs no randomness).
const std::string kSecret(64, 'b');
const std::string kToken = "gst_00000000000000aa_" + kSecret;

const server::TokenTable& Table() {
  static const server::TokenTable* table = [] {
    auto* t = new server::TokenTable;
    t->Put({"00000000000000aa", "alice", "ml", false, 1, server::Sha256Hex(kSecret)});
    return t;
  }();
  return *table;
}

// A refusal says one of a few fixed things, whatever the input: it cannot echo the token.
void RequireRefusal(const Status& s) {
  static const std::string kFixed[] = {
      server::ParseBearer("Basic x").status().message(),
      server::ParseBearer("Bearer  ").status().message(),
      server::ParseToken("x").status().message(),
      Table().Authenticate("gst_00000000000000ab_" + kSecret).status().message()};
  FUZZ_REQUIRE(s.code() == StatusCode::kUnauthenticated, s.ToString());
  bool fixed = false;
  for (const std::string& m : kFixed) fixed |= s.message() == m;
  FUZZ_REQUIRE(fixed, "a refusal that depends on the input: " + s.message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(fuzz::Text(data, size));
  StatusOr<std::string> bearer = server::ParseBearer(input);
  if (bearer.ok()) {
    FUZZ_REQUIRE(!bearer->empty() && bearer->size() < input.size(), "bearer token size");
    FUZZ_REQUIRE(input.find(*bearer) != std::string::npos, "the token is not from the header");
  } else {
    RequireRefusal(bearer.status());
  }
  for (const std::string& token : {input, bearer.ok() ? *bearer : std::string()}) {
    StatusOr<server::TokenParts> parts = server::ParseToken(token);
    if (parts.ok()) {
      FUZZ_REQUIRE(parts->id.size() == 16 && parts->secret.size() == 64, token);
    } else {
      RequireRefusal(parts.status());
    }
    StatusOr<server::Caller> caller = Table().Authenticate(token);
    if (caller.ok()) {
      FUZZ_REQUIRE(token == kToken, "a token that is not the table's authenticated");
      FUZZ_REQUIRE(caller->user == "alice" && caller->team == "ml" && !caller->admin, "caller");
    } else {
      RequireRefusal(caller.status());
    }
  }
  if (Status s = server::CheckPrincipalName(input, "user"); !s.ok()) {
    FUZZ_REQUIRE(s.code() == StatusCode::kInvalidArgument && s.message().rfind("user: ", 0) == 0,
                 s.ToString());
  } else {
    FUZZ_REQUIRE(!input.empty() && input.size() <= 64 && input[0] != '-', input);
  }
  StatusOr<store::TokenRecord> record = store::DecodeToken(input);
  if (record.ok()) {
    StatusOr<store::TokenRecord> again = store::DecodeToken(store::EncodeToken(*record));
    FUZZ_REQUIRE(again.ok() && again->id == record->id && again->user == record->user &&
                     again->team == record->team && again->admin == record->admin &&
                     again->created_ms == record->created_ms &&
                     again->secret_sha256 == record->secret_sha256,
                 "decode -> encode -> decode changed the token record");
  } else {
    FUZZ_REQUIRE(record.status().code() == StatusCode::kDataLoss, record.status().ToString());
  }
  return 0;
}
