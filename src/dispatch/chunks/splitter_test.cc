#include "dispatch/chunks/splitter.h"

#include <gtest/gtest.h>

namespace gpusched::chunks {
namespace {

TEST(CN110955526B, Step7_100MiBIn32MiBChunks) {
  auto chunks = SplitIntoChunks(100 * kMiB, 32 * kMiB);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  ASSERT_EQ(chunks->size(), 4u);
  EXPECT_EQ((*chunks)[0], (ChunkRange{0, 0, 32 * kMiB}));
  EXPECT_EQ((*chunks)[1], (ChunkRange{1, 32 * kMiB, 32 * kMiB}));
  EXPECT_EQ((*chunks)[2], (ChunkRange{2, 64 * kMiB, 32 * kMiB}));
  EXPECT_EQ((*chunks)[3], (ChunkRange{3, 96 * kMiB, 4 * kMiB}));
}

TEST(ChunkSplitter, EmptyBufferHasNoChunksAndExactMultipleHasNoTail) {
  EXPECT_TRUE(SplitIntoChunks(0, 64)->empty());
  auto chunks = SplitIntoChunks(128, 64);
  ASSERT_EQ(chunks->size(), 2u);
  EXPECT_EQ(chunks->back().bytes, 64);
}

TEST(ChunkSplitter, BadInputNamesTheField) {
  EXPECT_EQ(SplitIntoChunks(100, 0).status().message(), "chunk_bytes: must be > 0, got 0");
  EXPECT_EQ(SplitIntoChunks(-1, 8).status().message(), "bytes: must be >= 0, got -1");
  EXPECT_EQ(SplitIntoChunks(16, 6, 4).status().message(),
            "chunk_bytes: must be a multiple of the element size 4, got 6");
  EXPECT_EQ(SplitIntoChunks(18, 8, 4).status().message(),
            "bytes: must be a multiple of the element size 4, got 18");
}

TEST(ChunkSplitter, EqualPerStreamAlternative) {
  ChunkConfig config;
  EXPECT_EQ(ChunkBytesFor(config, 1000, 3, 4), 64 * kMiB);
  config.split = ChunkSplit::kEqualPerStream;
  // 3 GPUs x 4 streams = 12 parts of 1000 bytes of uint32: ceil(250 / 12) = 21 elements.
  EXPECT_EQ(ChunkBytesFor(config, 1000, 3, 4), 84);
  EXPECT_EQ(SplitIntoChunks(1000, 84, 4)->size(), 12u);
}

// The C ABI's default (issue 42): one chunk per GPU, between min_chunk_bytes and chunk_bytes.
TEST(CN110955526B, Step7_SpreadOverGpusPutsOneInputOnEveryGpu) {
  ChunkConfig config;
  config.split = ChunkSplit::kSpreadOverGpus;
  // 64 MiB on 4 GPUs: 4 chunks of 16 MiB (the fixed default would make one 64 MiB chunk).
  EXPECT_EQ(ChunkBytesFor(config, 64 * kMiB, 4, 4), 16 * kMiB);
  EXPECT_EQ(SplitIntoChunks(64 * kMiB, 16 * kMiB, 4)->size(), 4u);
  // Large inputs keep 64 MiB chunks; small ones get min_chunk_bytes.
  EXPECT_EQ(ChunkBytesFor(config, 10 * kGiB, 4, 4), 64 * kMiB);
  EXPECT_EQ(ChunkBytesFor(config, 1000, 4, 4), kMiB);
  // ceil(total / gpus) rounded up to a whole element: 3 GPUs, 3 MiB + 12 bytes of 8-byte
  // elements is ceil((3 MiB + 12) / 3) = 1 MiB + 4 bytes, rounded to 1 MiB + 8.
  config.min_chunk_bytes = 8;
  EXPECT_EQ(ChunkBytesFor(config, 3 * kMiB + 12, 3, 8), kMiB + 8);
  // The cap is rounded down to a whole element (a 12-byte element under a 64-byte cap: 60).
  config.chunk_bytes = 64;
  EXPECT_EQ(ChunkBytesFor(config, 1000, 1, 12), 60);
  config.min_chunk_bytes = 0;
  EXPECT_EQ(config.Validate().message(), "min_chunk_bytes: must be > 0, got 0");
}

// Issue 42: a spread chunk also fits the smallest GPU: every stream holds one subtask (its input
// chunks and its output chunk) at once. An explicit chunk size is not capped.
TEST(CN110955526B, Issue42_Step7_SpreadChunksAreCappedByGpuMemory) {
  ChunkConfig config;
  config.split = ChunkSplit::kSpreadOverGpus;
  // 16 MiB GPUs, 4 streams, 1 input + 1 output: 2 MiB; 2 inputs + 1 output: 1/3 of 4 MiB.
  EXPECT_EQ(SpreadMemoryCap(16 * kMiB, 4, 2), 2 * kMiB);
  EXPECT_EQ(SpreadMemoryCap(16 * kMiB, 4, 3), 16 * kMiB / 12);
  EXPECT_EQ(SpreadMemoryCap(0, 4, 2), 0);  // no GPUs: no cap
  // 64 MiB on 4 GPUs of 16 MiB: 2 MiB chunks (32 of them) instead of 16 MiB ones no GPU holds.
  EXPECT_EQ(ChunkBytesFor(config, 64 * kMiB, 4, 4, 2 * kMiB), 2 * kMiB);
  // The cap wins over min_chunk_bytes, is rounded down to a whole element, never below one.
  EXPECT_EQ(ChunkBytesFor(config, 1000, 4, 4, 512 * 1024), 512 * 1024);
  EXPECT_EQ(ChunkBytesFor(config, 64 * kMiB, 4, 8, 1'398'101), 1'398'096);
  EXPECT_EQ(ChunkBytesFor(config, 64, 1, 8, 3), 8);
  // A cap above the spread changes nothing; big GPUs keep chunk_bytes as the largest chunk.
  EXPECT_EQ(ChunkBytesFor(config, 64 * kMiB, 4, 4, 32 * kMiB), 16 * kMiB);
  EXPECT_EQ(ChunkBytesFor(config, 10 * kGiB, 4, 4, 10 * kGiB), 64 * kMiB);
  // An explicit (fixed) chunk size is honoured whatever the cap.
  config.split = ChunkSplit::kFixedSize;
  config.chunk_bytes = 8 * kMiB;
  EXPECT_EQ(ChunkBytesFor(config, 64 * kMiB, 4, 4, 2 * kMiB), 8 * kMiB);
}

}  // namespace
}  // namespace gpusched::chunks
