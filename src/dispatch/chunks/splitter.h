#pragma once
// CN110955526B steps (5)-(8): a task's data is one contiguous host buffer (Spark's off-heap
// copy, handed over by address and length) cut into chunks, each the unit of one subtask.

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "dispatch/chunks/config.h"

namespace gpusched::chunks {

// A contiguous host buffer the caller owns; gpusched never frees it.
struct HostBuffer {
  void* data = nullptr;
  int64_t bytes = 0;
};

// One chunk: bytes [offset, offset + bytes) of its buffer.
struct ChunkRange {
  int64_t index = 0;
  int64_t offset = 0;
  int64_t bytes = 0;
  bool operator==(const ChunkRange&) const = default;
};

// CN110955526B step (7): chunks of `chunk_bytes`, the last one shorter. `element_bytes` is the
// kernel's element size: chunk_bytes and total_bytes must be multiples of it, so no element is
// split. A zero-length buffer has no chunks.
StatusOr<std::vector<ChunkRange>> SplitIntoChunks(int64_t total_bytes, int64_t chunk_bytes,
                                                  int64_t element_bytes = 1);

// The chunk size `config` asks for: config.chunk_bytes; with ChunkSplit::kEqualPerStream
// ceil(total / (gpus x streams)) rounded up to a whole element (at least one element); with
// kSpreadOverGpus max(min_chunk_bytes, ceil(total / gpus)) rounded up to a whole element, at
// most min(chunk_bytes, `memory_cap_bytes` when > 0) rounded down to a whole element (at least
// one). The cap bounds the spread only: a fixed chunk_bytes is every chunk's size, as asked.
int64_t ChunkBytesFor(const ChunkConfig& config, int64_t total_bytes, int num_gpus,
                      int64_t element_bytes, int64_t memory_cap_bytes = 0);

// The memory cap of a spread chunk (issue 42): the largest chunk that lets every stream of the
// smallest GPU hold one chunk subtask of `buffers_per_subtask` chunks (its inputs and its
// output) at once: smallest_gpu_bytes / (streams_per_gpu x buffers_per_subtask); 0 (no cap)
// without GPUs.
int64_t SpreadMemoryCap(int64_t smallest_gpu_bytes, int streams_per_gpu, int buffers_per_subtask);

}  // namespace gpusched::chunks
