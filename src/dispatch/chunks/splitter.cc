#include "dispatch/chunks/splitter.h"

#include <algorithm>
#include <string>

namespace gpusched::chunks {

StatusOr<std::vector<ChunkRange>> SplitIntoChunks(int64_t total_bytes, int64_t chunk_bytes,
                                                  int64_t element_bytes) {
  if (chunk_bytes <= 0) {
    return InvalidArgument("chunk_bytes: must be > 0, got " + std::to_string(chunk_bytes));
  }
  if (total_bytes < 0) {
    return InvalidArgument("bytes: must be >= 0, got " + std::to_string(total_bytes));
  }
  if (element_bytes <= 0) {
    return InvalidArgument("element_bytes: must be > 0, got " + std::to_string(element_bytes));
  }
  if (chunk_bytes % element_bytes != 0) {
    return InvalidArgument("chunk_bytes: must be a multiple of the element size " +
                           std::to_string(element_bytes) + ", got " + std::to_string(chunk_bytes));
  }
  if (total_bytes % element_bytes != 0) {
    return InvalidArgument("bytes: must be a multiple of the element size " +
                           std::to_string(element_bytes) + ", got " + std::to_string(total_bytes));
  }
  std::vector<ChunkRange> chunks;
  chunks.reserve(static_cast<size_t>((total_bytes + chunk_bytes - 1) / chunk_bytes));
  for (int64_t offset = 0, i = 0; offset < total_bytes; offset += chunk_bytes, ++i) {
    chunks.push_back({i, offset, std::min(chunk_bytes, total_bytes - offset)});
  }
  return chunks;
}

int64_t SpreadMemoryCap(int64_t smallest_gpu_bytes, int streams_per_gpu, int buffers_per_subtask) {
  if (smallest_gpu_bytes <= 0) return 0;
  return std::max<int64_t>(1, smallest_gpu_bytes / (int64_t{std::max(streams_per_gpu, 1)} *
                                                     std::max(buffers_per_subtask, 1)));
}

int64_t ChunkBytesFor(const ChunkConfig& config, int64_t total_bytes, int num_gpus,
                      int64_t element_bytes, int64_t memory_cap_bytes) {
  if (config.split == ChunkSplit::kFixedSize) return config.chunk_bytes;
  if (config.split == ChunkSplit::kSpreadOverGpus) {
    const int64_t per_gpu = (total_bytes + std::max(num_gpus, 1) - 1) / std::max(num_gpus, 1);
    const int64_t want = std::max(config.min_chunk_bytes, per_gpu);
    const int64_t elements = (want + element_bytes - 1) / element_bytes;
    const int64_t cap_bytes =
        memory_cap_bytes > 0 ? std::min(config.chunk_bytes, memory_cap_bytes) : config.chunk_bytes;
    const int64_t cap_elements = std::max<int64_t>(1, cap_bytes / element_bytes);
    return std::min(elements, cap_elements) * element_bytes;
  }
  const int64_t parts = std::max<int64_t>(1, int64_t{num_gpus} * config.streams_per_gpu);
  const int64_t elements = (total_bytes / element_bytes + parts - 1) / parts;
  return std::max<int64_t>(1, elements) * element_bytes;
}

}  // namespace gpusched::chunks
