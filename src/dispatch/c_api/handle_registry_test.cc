// Issue 42 item 7: a handle carries a slot and a generation, so a handle destroyed and followed
// by a new one in the same slot is refused, and the new one works.
#include "dispatch/c_api/handle_registry.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gpusched::capi {
namespace {

struct Object {
  CallGate gate;
};

struct TestHandle;  // the C API's opaque handle type: never defined, never dereferenced

TestHandle* Make(Object& o, HandleKind kind) {
  StatusOr<void*> h = AddHandle(&o, kind);
  EXPECT_TRUE(h.ok()) << h.status().message();
  return static_cast<TestHandle*>(*h);
}

// The error of a refused handle of `kind`, or "" when it is live.
std::string Refusal(const TestHandle* h, HandleKind kind) {
  const Status st = CheckLive<Object>(h, kind, "obj").status();
  return st.ok() ? "" : st.message();
}

TEST(HandleRegistryTest, Issue42_HandleIsNotTheAddressAndFindsItsObject) {
  Object o;
  TestHandle* h = Make(o, HandleKind::kDispatcher);
  EXPECT_NE(h, nullptr);
  EXPECT_NE(static_cast<void*>(h), static_cast<void*>(&o));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(h) & 1, 1u);  // odd: no aligned object's address
  StatusOr<Object*> found = CheckLive<Object>(h, HandleKind::kDispatcher, "obj");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, &o);
  std::optional<CallGate::Pass> pass;
  Object* entered = nullptr;
  ASSERT_TRUE(Enter(h, HandleKind::kDispatcher, "obj", "call", pass, entered).ok());
  EXPECT_EQ(entered, &o);
  pass.reset();
  RemoveHandle(h);
}

TEST(HandleRegistryTest, Issue42_SlotReuseBumpsGenerationSoTheStaleHandleIsRefused) {
  Object a, b;
  TestHandle* old_handle = Make(a, HandleKind::kChunksRuntime);
  RemoveHandle(old_handle);
  // The freed slot is reused first: the new handle is in the same slot, a later generation.
  TestHandle* new_handle = Make(b, HandleKind::kChunksRuntime);
  const uint64_t slot_mask = ((uint64_t{1} << kSlotBits) - 1) << 4;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(old_handle) & slot_mask,
            reinterpret_cast<uintptr_t>(new_handle) & slot_mask);
  EXPECT_NE(old_handle, new_handle);
  EXPECT_EQ(Refusal(old_handle, HandleKind::kChunksRuntime),
            "obj: not a live handle: the chunk runtime handle was destroyed");
  EXPECT_EQ(*CheckLive<Object>(new_handle, HandleKind::kChunksRuntime, "obj"), &b);
  // Taking the stale handle takes nothing; the new one is still live afterwards.
  EXPECT_FALSE(TakeHandle(old_handle, HandleKind::kChunksRuntime, "obj").ok());
  EXPECT_EQ(Refusal(new_handle, HandleKind::kChunksRuntime), "");
  StatusOr<void*> taken = TakeHandle(new_handle, HandleKind::kChunksRuntime, "obj");
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(*taken, &b);
  EXPECT_EQ(Refusal(new_handle, HandleKind::kChunksRuntime),
            "obj: not a live handle: the chunk runtime handle was destroyed");
}

TEST(HandleRegistryTest, Issue42_SlotReusedByAnotherKindNamesBothKinds) {
  Object a, b;
  TestHandle* job = Make(a, HandleKind::kChunksJob);
  RemoveHandle(job);
  TestHandle* plan = Make(b, HandleKind::kChunksPlan);  // same slot, another kind
  EXPECT_EQ(Refusal(job, HandleKind::kChunksJob),
            "obj: not a live handle: the chunk job handle was destroyed");
  EXPECT_EQ(Refusal(job, HandleKind::kChunksPlan),
            "obj: not a live handle: a destroyed chunk job handle, not a chunk plan handle");
  EXPECT_EQ(Refusal(plan, HandleKind::kChunksJob),
            "obj: not a live handle: it is a chunk plan handle, not a chunk job handle");
  EXPECT_EQ(Refusal(plan, HandleKind::kChunksPlan), "");
  RemoveHandle(plan);
}

TEST(HandleRegistryTest, Issue42_MadeUpValuesAndNullAreRefused) {
  Object o;
  TestHandle* live = Make(o, HandleKind::kCancel);
  const auto v = reinterpret_cast<uintptr_t>(live);
  const std::string never = "obj: not a live handle: no cancel handle (never created, or destroyed long ago)";
  EXPECT_EQ(Refusal(reinterpret_cast<TestHandle*>(&o), HandleKind::kCancel), never);  // an address
  EXPECT_EQ(Refusal(reinterpret_cast<TestHandle*>(v + (uintptr_t{1} << 60)), HandleKind::kCancel),
            never);  // a generation not made yet
  EXPECT_EQ(Refusal(reinterpret_cast<TestHandle*>(v | (uintptr_t{0xFFFFFF} << 4)), HandleKind::kCancel),
            never);  // a slot not made yet
  EXPECT_EQ(Refusal(reinterpret_cast<TestHandle*>(v | 0xE), HandleKind::kCancel), never);  // kind 7
  EXPECT_EQ(Refusal(nullptr, HandleKind::kCancel), "obj: must not be null");
  EXPECT_EQ(TakeHandle(nullptr, HandleKind::kCancel, "obj").status().message(), "obj: must not be null");
  RemoveHandle(reinterpret_cast<TestHandle*>(&o));  // forgets nothing
  EXPECT_EQ(Refusal(live, HandleKind::kCancel), "");
  RemoveHandle(live);
  RemoveHandle(live);  // a second remove is harmless
}

TEST(HandleRegistryTest, Issue42_CloseHandleRefusesASecondClose) {
  auto o = std::make_unique<Object>();
  StatusOr<TestHandle*> h = NewHandle<TestHandle>(std::move(o), HandleKind::kSimDevices);
  ASSERT_TRUE(h.ok());
  StatusOr<Object*> closed = CloseHandle<Object>(*h, HandleKind::kSimDevices, "obj", "destroy");
  ASSERT_TRUE(closed.ok());
  EXPECT_FALSE(CloseHandle<Object>(*h, HandleKind::kSimDevices, "obj", "destroy").ok());
  RemoveHandle(*h);
  delete *closed;
  EXPECT_EQ(Refusal(*h, HandleKind::kSimDevices),
            "obj: not a live handle: the simulated devices handle was destroyed");
}

}  // namespace
}  // namespace gpusched::capi
