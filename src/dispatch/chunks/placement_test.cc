// CN110955526B steps (9) and (10): the pure placement policies, scenario by scenario
// (PATENTS.md section 3, tests 1-6, on 3 GPUs).

#include "dispatch/chunks/placement.h"

#include <gtest/gtest.h>

namespace gpusched::chunks {
namespace {

GpuView Gpu(int id, int64_t free_mib, int free_streams, int64_t total_mib = 1024) {
  return GpuView{id, free_mib * kMiB, total_mib * kMiB, free_streams};
}

const ChunkKey kChunk{7, 3};

TEST(CN110955526B, Step10_2_StreamsSortDescendingStable) {
  const auto sorted = SortByFreeStreams({Gpu(0, 100, 1), Gpu(1, 100, 3), Gpu(2, 100, 2)});
  ASSERT_EQ(sorted.size(), 3u);
  EXPECT_EQ(sorted[0].gpu, 1);
  EXPECT_EQ(sorted[1].gpu, 2);
  EXPECT_EQ(sorted[2].gpu, 0);
  // Equal counts keep id order whatever the input order.
  const auto ties = SortByFreeStreams({Gpu(2, 1, 2), Gpu(0, 1, 2), Gpu(1, 1, 4)});
  EXPECT_EQ(ties[0].gpu, 1);
  EXPECT_EQ(ties[1].gpu, 0);
  EXPECT_EQ(ties[2].gpu, 2);
}

TEST(CN110955526B, Step10_5_CachedChunkRunsOnItsGpu) {
  const std::vector<GpuView> gpus{Gpu(0, 100, 1), Gpu(1, 100, 3), Gpu(2, 100, 2)};
  const CacheMap cache{{kChunk, 2}};
  // Locality beats G1's three free streams, and needs no memory check.
  EXPECT_EQ(PlaceStream(gpus, cache, kChunk, 500 * kMiB, ChunkConfig{}),
            StreamDecision(RunOnCachedGpu{2}));
}

TEST(CN110955526B, Step10_6_CachedGpuWithoutStreamMovesToMostFreeStreams) {
  const std::vector<GpuView> gpus{Gpu(0, 100, 0), Gpu(1, 100, 3), Gpu(2, 100, 2)};
  const CacheMap cache{{kChunk, 0}};
  EXPECT_EQ(PlaceStream(gpus, cache, kChunk, 40 * kMiB, ChunkConfig{}),
            StreamDecision(MoveToGpu{0, 1}));
}

TEST(CN110955526B, Step10_6_DefaultWaitsWhenTargetShortButLiteralMoves) {
  // G1 has the most streams but only 30 MiB free for a 40 MiB subtask.
  const std::vector<GpuView> gpus{Gpu(0, 100, 0), Gpu(1, 30, 3), Gpu(2, 100, 2)};
  const CacheMap cache{{kChunk, 0}};
  ChunkConfig config;
  EXPECT_TRUE(std::holds_alternative<Wait>(PlaceStream(gpus, cache, kChunk, 40 * kMiB, config)));
  config.move_check = MoveCheck::kLiteral;
  EXPECT_EQ(PlaceStream(gpus, cache, kChunk, 40 * kMiB, config), StreamDecision(MoveToGpu{0, 1}));
  // No GPU has a stream at all: default waits, literal still names h = str[0] (G0 by id).
  const std::vector<GpuView> none{Gpu(0, 100, 0), Gpu(1, 100, 0)};
  EXPECT_EQ(PlaceStream(none, cache, kChunk, kMiB, config), StreamDecision(MoveToGpu{0, 0}));
  EXPECT_TRUE(std::holds_alternative<Wait>(PlaceStream(none, cache, kChunk, kMiB, ChunkConfig{})));
}

TEST(CN110955526B, Step10_10_UncachedChunkGoesToFirstGpuWithStreamAndMemory) {
  const std::vector<GpuView> gpus{Gpu(0, 100, 1), Gpu(1, 30, 3), Gpu(2, 100, 2)};
  EXPECT_EQ(PlaceStream(gpus, CacheMap{}, kChunk, 40 * kMiB, ChunkConfig{}),
            StreamDecision(StreamOnGpu{2}));
  // With enough memory everywhere the most free streams wins.
  EXPECT_EQ(PlaceStream(gpus, CacheMap{}, kChunk, 20 * kMiB, ChunkConfig{}),
            StreamDecision(StreamOnGpu{1}));
}

TEST(CN110955526B, Step10_9_NoFreeStreamWaitsOrFallsBackToCpu) {
  const std::vector<GpuView> gpus{Gpu(0, 100, 0), Gpu(1, 100, 0), Gpu(2, 100, 0)};
  ChunkConfig config;
  const StreamDecision d = PlaceStream(gpus, CacheMap{}, kChunk, kMiB, config);
  ASSERT_TRUE(std::holds_alternative<Wait>(d));
  EXPECT_EQ(std::get<Wait>(d).reason, "no GPU has a free stream");
  config.no_fit = NoFitAction::kCpuFallback;
  EXPECT_TRUE(std::holds_alternative<RunOnCpu>(PlaceStream(gpus, CacheMap{}, kChunk, kMiB, config)));
}

TEST(CN110955526B, Step10_8_StreamsButNoMemoryWaits) {
  const std::vector<GpuView> gpus{Gpu(0, 10, 4), Gpu(1, 10, 1), Gpu(2, 0, 2)};
  const StreamDecision d = PlaceStream(gpus, CacheMap{}, kChunk, 64 * kMiB, ChunkConfig{});
  ASSERT_TRUE(std::holds_alternative<Wait>(d));
  EXPECT_EQ(std::get<Wait>(d).reason, "no GPU with a free stream has enough free memory");
}

TEST(CN110955526B, Step9_CacheGoesToLowestMemoryUsageRate) {
  // G0 70 % used, G1 30 % used, both with room for the chunk.
  const std::vector<GpuView> gpus{Gpu(0, 300, 4, 1000), Gpu(1, 700, 4, 1000)};
  EXPECT_EQ(PlaceCache(gpus, 64 * kMiB, ChunkConfig{}), CacheDecision(CacheOnGpu{1}));
}

TEST(CN110955526B, Step9_UsageRateBeatsAbsoluteFreeMemoryUnlessConfigured) {
  // G0: 50 % of 16 GiB used (8 GiB free); G1: 25 % of 8 GiB used (6 GiB free).
  const std::vector<GpuView> gpus{Gpu(0, 8192, 4, 16384), Gpu(1, 6144, 4, 8192)};
  ChunkConfig config;
  EXPECT_EQ(PlaceCache(gpus, kMiB, config), CacheDecision(CacheOnGpu{1}));
  config.cache_rank = CacheRank::kMostFreeMemory;
  EXPECT_EQ(PlaceCache(gpus, kMiB, config), CacheDecision(CacheOnGpu{0}));
}

TEST(CN110955526B, Step9_TiesByMoreFreeThenLowestId) {
  // Same rate (50 %): more free memory wins; identical GPUs: lowest id.
  EXPECT_EQ(PlaceCache(std::vector<GpuView>{Gpu(0, 100, 1, 200), Gpu(1, 200, 1, 400)}, kMiB, {}),
            CacheDecision(CacheOnGpu{1}));
  EXPECT_EQ(PlaceCache(std::vector<GpuView>{Gpu(2, 100, 1), Gpu(1, 100, 1)}, kMiB, {}),
            CacheDecision(CacheOnGpu{1}));
}

TEST(CN110955526B, Step9_NoGpuWithRoomKeepsChunkInHost) {
  // The lowest usage rate (G1) lacks room; only GPUs with free >= size are candidates.
  const std::vector<GpuView> gpus{Gpu(0, 50, 4, 1000), Gpu(1, 60, 4, 100)};
  EXPECT_EQ(PlaceCache(gpus, 55 * kMiB, {}), CacheDecision(CacheOnGpu{1}));
  EXPECT_EQ(PlaceCache(gpus, 61 * kMiB, {}), CacheDecision(KeepInHost{}));
}

TEST(CN110955526B, RoundRobinBaselineIgnoresLocality) {
  const std::vector<GpuView> gpus{Gpu(0, 100, 2), Gpu(1, 100, 2)};
  const CacheMap cache{{kChunk, 0}};
  EXPECT_EQ(PlaceRoundRobin(gpus, cache, kChunk, kMiB, 1), StreamDecision(StreamOnGpu{1}));
  EXPECT_EQ(PlaceRoundRobin(gpus, cache, kChunk, kMiB, 2), StreamDecision(RunOnCachedGpu{0}));
}

TEST(ChunkConfig, ValidateNamesTheField) {
  ChunkConfig config;
  EXPECT_TRUE(config.Validate().ok());
  config.chunk_bytes = 0;
  EXPECT_EQ(config.Validate().message(), "chunk_bytes: must be > 0, got 0");
  config = ChunkConfig{};
  config.streams_per_gpu = -1;
  EXPECT_EQ(config.Validate().message(), "streams_per_gpu: must be > 0, got -1");
}

}  // namespace
}  // namespace gpusched::chunks
