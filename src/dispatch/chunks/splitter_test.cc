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

}  // namespace
}  // namespace gpusched::chunks
