#pragma once
// JSON encoding of the records the SQLite and etcd stores keep. Versioned ("v": 1) so a later format
// can still read old rows; decoding errors are DataLoss naming the field.

#include <string>
#include <vector>

#include "base/status.h"
#include "store/state_store.h"

namespace gpusched::store {

std::string EncodeTask(const TaskRecord& record);
StatusOr<TaskRecord> DecodeTask(const std::string& text);
// Issue 38: an upper bound of EncodeTask(record).size(), without encoding (every string counted
// as if each byte needed a 6-byte escape, every number at its widest), to size commits.
size_t EncodedTaskBound(const core::Task& task,
                        const std::optional<core::Placement>& last_placement);
std::string EncodeNode(const NodeRecord& record);
StatusOr<NodeRecord> DecodeNode(const std::string& text);
std::string EncodeProfile(const core::MemoryProfile& profile);
StatusOr<core::MemoryProfile> DecodeProfile(const std::string& text);
// A learned profile's kept peaks (LearnedPeak::recent_mib) as a JSON array of MiB.
std::string EncodePeaks(const std::vector<MiB>& peaks);
StatusOr<std::vector<MiB>> DecodePeaks(const std::string& text);
std::string EncodeToken(const TokenRecord& record);
StatusOr<TokenRecord> DecodeToken(const std::string& text);
// Issue 38: a rollup row, {"day", "team", "user", "failure", and per hour "gpu_micro_ms",
// "gpu_mem_mib_ms", "tasks": arrays of 24 integers}. The decoder is strict: every field present
// with its type, no other field, no negative number, 24 slots; DataLoss naming the field.
std::string EncodeRollup(const RollupRow& row);
StatusOr<RollupRow> DecodeRollup(const std::string& text);

}  // namespace gpusched::store
