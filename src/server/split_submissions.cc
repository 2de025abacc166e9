// SplitSubmissions: submissions stored in several commits (issue 38).

#include "server/split_submissions.h"

namespace gpusched::server {
namespace {

constexpr char kPartSeparator = '\x1f';

}  // namespace

std::string SplitSubmissions::PartKey(const std::string& key, size_t part) {
  return key + kPartSeparator + "part" + std::to_string(part);
}

Status SplitSubmissions::ValidKey(const std::string& key) {
  if (key.find(kPartSeparator) == std::string::npos) return Status::Ok();
  return InvalidArgument("idempotency_key: \"" + key.substr(0, 64) +
                         "\" holds the control character 0x1f, which a key may not hold");
}

StatusOr<std::optional<uint64_t>> SplitSubmissions::ReadStored(store::StateStore& store,
                                                               const std::string& key,
                                                               size_t n,
                                                               std::optional<Status>* partly) {
  GS_ASSIGN_OR_RETURN(std::optional<uint64_t> first, store.LookupIdempotencyKey(key));
  if (!first || n == 0) return first;
  const uint64_t last_wanted = *first + n - 1;
  std::optional<uint64_t> last;  // the last task of the last stored part
  for (size_t part = 1; !last || *last < last_wanted; ++part) {
    GS_ASSIGN_OR_RETURN(std::optional<uint64_t> end, store.LookupIdempotencyKey(PartKey(key, part)));
    if (!end) break;
    last = end;
  }
  if (!last || *last >= last_wanted) return first;  // not split, or every part stored
  *partly = Partly(TaskId(*first), n, static_cast<size_t>(*last - *first + 1),
                   "a commit of a later part failed");
  return std::optional<uint64_t>();
}

Status SplitSubmissions::Partly(TaskId first, size_t count, size_t stored,
                                const std::string& why) {
  const uint64_t f = first.value();
  return FailedPrecondition(
      "submission stored in part: it was too large for one commit and was stored in parts; "
      "tasks " + std::to_string(f) + "-" + std::to_string(f + stored - 1) + " (the first " +
      std::to_string(stored) + " of " + std::to_string(count) + ") are queued, tasks " +
      std::to_string(f + stored) + "-" + std::to_string(f + count - 1) +
      " were not stored (" + why + "): submit those again, under another idempotency key");
}

SplitSubmissions::Split* SplitSubmissions::Find(TaskId id) {
  auto it = splits_.upper_bound(id);
  if (it == splits_.begin()) return nullptr;
  --it;
  return id.value() < it->first.value() + it->second.count ? &it->second : nullptr;
}

std::vector<SplitSubmissions::Split> SplitSubmissions::TakeAll() {
  std::vector<Split> all;
  for (auto& [first, s] : splits_) all.push_back(s);
  splits_.clear();
  return all;
}

}  // namespace gpusched::server
