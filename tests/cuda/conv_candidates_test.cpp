// The fallback over cuDNN's convolution algorithms (src/backend/cuda/conv_candidates.h) with
// stubbed statuses and allocations: runs in every build, with or without a GPU or cuDNN.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backend/cuda/conv_candidates.h"

namespace tandem::cuda_detail {
namespace {

// A workspace from the stub allocator; counts live workspaces so that a test can check that
// one candidate's workspace is released before the next one's is taken.
struct StubAllocator {
  size_t limit = SIZE_MAX;  // larger requests fail with out_of_memory
  ErrorCode fail_code = ErrorCode::out_of_memory;
  int live = 0, max_live = 0;
  std::vector<size_t> requests;

  struct Workspace {
    StubAllocator* owner;
    void* ptr;
    Workspace(StubAllocator* o, void* p) : owner(o), ptr(p) {}
    Workspace(const Workspace&) = delete;
    ~Workspace() { --owner->live; }
    void* get() const { return ptr; }
  };

  Workspace operator()(size_t bytes) {
    requests.push_back(bytes);
    if (bytes > limit) throw_error(fail_code, "alloc", "stub: " + std::to_string(bytes) + " bytes");
    ++live;
    if (live > max_live) max_live = live;
    return Workspace(this, reinterpret_cast<void*>(0x1000 + bytes));
  }
};

// A runner returning a scripted status per algorithm id; records the order of the runs and
// checks that it got the workspace allocated for that candidate.
struct StubRun {
  std::map<int, int> status;  // algo -> status; missing: success
  std::vector<int> ran;
  int operator()(int algo, void* ws, size_t bytes) {
    ran.push_back(algo);
    EXPECT_EQ(ws, reinterpret_cast<void*>(0x1000 + bytes)) << "algo " << algo;
    auto it = status.find(algo);
    return it == status.end() ? cudnn_status::success : it->second;
  }
};

std::vector<ConvCandidate> candidates(int n, size_t bytes = 64) {
  std::vector<ConvCandidate> c;
  for (int i = 0; i < n; ++i) c.push_back({10 + i, cudnn_status::success, bytes * (i + 1)});
  return c;
}

TEST(ConvCandidates, EveryNotSupportedSubCodeMovesOn) {
  for (int code = 3000; code <= 3014; ++code) {
    auto c = candidates(3);
    StubAllocator alloc;
    StubRun run{{{10, code}, {11, code}}, {}};
    const CandidateOutcome o = run_candidates(c.data(), 3, alloc, run);
    EXPECT_EQ(o.accepted, 2) << "status " << code;
    EXPECT_EQ(run.ran, (std::vector<int>{10, 11, 12})) << "status " << code;
    EXPECT_EQ(o.rejected, 2);
    EXPECT_FALSE(o.fatal);
  }
}

TEST(ConvCandidates, SizeInsufficientMovesOnOtherBadParamsAreFatal) {
  auto c = candidates(3);
  {
    StubAllocator alloc;
    StubRun run{{{10, cudnn_status::bad_param_size_insufficient}}, {}};
    const CandidateOutcome o = run_candidates(c.data(), 3, alloc, run);
    EXPECT_EQ(o.accepted, 1);
    EXPECT_EQ(run.ran, (std::vector<int>{10, 11}));
  }
  for (int fatal : {2000, 2002, 2008, 4000, 4004, 5000}) {
    StubAllocator alloc;
    StubRun run{{{10, 3002}, {11, fatal}}, {}};
    const CandidateOutcome o = run_candidates(c.data(), 3, alloc, run);
    EXPECT_EQ(o.accepted, -1) << fatal;
    EXPECT_TRUE(o.fatal) << fatal;
    EXPECT_EQ(o.status, fatal);
    EXPECT_EQ(run.ran, (std::vector<int>{10, 11})) << "no candidate after a fatal status runs";
  }
}

TEST(ConvCandidates, UnallocatableWorkspaceMovesOnAndIsReleasedFirst) {
  // At most 100 bytes can be had: algo 10 is rejected (shared memory), 11 and 12 lack their
  // workspace, 13 runs.
  std::vector<ConvCandidate> c = {{10, 0, 64}, {11, 0, 4096}, {12, 0, 8192}, {13, 0, 32}};
  StubAllocator alloc;
  alloc.limit = 100;
  StubRun run{{{10, 3010}}, {}};
  const CandidateOutcome o = run_candidates(c.data(), 4, alloc, run);
  EXPECT_EQ(o.accepted, 3);
  EXPECT_EQ(run.ran, (std::vector<int>{10, 13}));
  EXPECT_EQ(alloc.requests, (std::vector<size_t>{64, 4096, 8192, 32}));
  EXPECT_EQ(o.unallocatable, 2);
  EXPECT_EQ(o.unallocatable_bytes, 4096u);
  EXPECT_EQ(alloc.max_live, 1) << "a candidate's workspace must be released before the next is taken";
  EXPECT_EQ(alloc.live, 0);
}

TEST(ConvCandidates, OnlyUnallocatableIsOutOfMemory) {
  std::vector<ConvCandidate> c = {{1, 0, 1 << 20}, {2, 0, 1 << 21}};
  StubAllocator alloc;
  alloc.limit = 1000;
  StubRun run;
  const CandidateOutcome o = run_candidates(c.data(), 2, alloc, run);
  EXPECT_EQ(o.accepted, -1);
  EXPECT_TRUE(run.ran.empty());
  try {
    throw_no_candidate("cudnnConvolutionForward", o, "unused");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory) << e.what();
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("[cudnn] cudnnConvolutionForward failed: no algorithm ran", 0), 0u) << m;
    EXPECT_NE(m.find("algo 1: workspace of 1048576 bytes not allocatable"), std::string::npos) << m;
  }
}

TEST(ConvCandidates, AllRejectedIsNotAvailableAndNamesEachTry) {
  auto c = candidates(2);
  StubAllocator alloc;
  StubRun run{{{10, 3002}, {11, 3004}}, {}};
  const CandidateOutcome o = run_candidates(c.data(), 2, alloc, run);
  EXPECT_EQ(o.accepted, -1);
  EXPECT_FALSE(o.fatal);
  try {
    throw_no_candidate("cudnnConvolutionBackwardData", o, "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
    const std::string m = e.what();
    EXPECT_NE(m.find("algo 10: status 3002; algo 11: status 3004"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDNN_STATUS_NOT_SUPPORTED_LAYOUT"), std::string::npos) << m;
  }
}

TEST(ConvCandidates, FatalStatusKeepsItsClass) {
  auto c = candidates(2);
  StubAllocator alloc;
  StubRun run{{{10, cudnn_status::device_allocation_failed}}, {}};
  const CandidateOutcome o = run_candidates(c.data(), 2, alloc, run);
  ASSERT_TRUE(o.fatal);
  try {
    throw_no_candidate("cudnnConvolutionBackwardFilter", o, "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory) << e.what();
  }
}

TEST(ConvCandidates, HeuristicsFailuresAreSkippedWithoutAllocating) {
  std::vector<ConvCandidate> c = {{1, 3000, 8}, {2, 4000, 16}, {3, 0, 24}};
  StubAllocator alloc;
  StubRun run;
  const CandidateOutcome o = run_candidates(c.data(), 3, alloc, run);
  EXPECT_EQ(o.accepted, 2);
  EXPECT_EQ(run.ran, (std::vector<int>{3}));
  EXPECT_EQ(alloc.requests, (std::vector<size_t>{24}));
  // None offered: not_available, saying so.
  const CandidateOutcome none = run_candidates(c.data(), 0, alloc, run);
  EXPECT_EQ(none.accepted, -1);
  try {
    throw_no_candidate("cudnnConvolutionForward", none, "unused");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
    EXPECT_NE(std::string(e.what()).find("the heuristics offered no algorithm"), std::string::npos) << e.what();
  }
}

TEST(ConvCandidates, OtherAllocationErrorsPropagate) {
  auto c = candidates(2);
  StubAllocator alloc;
  alloc.limit = 0;
  alloc.fail_code = ErrorCode::internal;
  StubRun run;
  EXPECT_THROW(run_candidates(c.data(), 2, alloc, run), Error);
  EXPECT_TRUE(run.ran.empty());
}

}  // namespace
}  // namespace tandem::cuda_detail
