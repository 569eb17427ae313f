// Shared by the tests that run under mpirun (mpirun_test.cpp, mpirun_stream_test.cpp): the
// check that every rank ended with the same weights.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/tensor.h"

namespace tandem::testing {

/// Every rank's `mine` gathered (a collective): each rank's must equal rank 0's bit for bit.
inline void expect_same_on_every_rank(comm::Communicator& c, const std::vector<float>& mine) {
  Tensor send = Tensor::from_vector({static_cast<int64_t>(mine.size())}, mine);
  Tensor all = Tensor::empty({static_cast<int64_t>(mine.size()) * c.world_size()});
  c.all_gather(send, all, runtime(DeviceKind::cpu).default_stream(0));
  const float* a = all.data<float>();
  const size_t n = mine.size();
  for (int r = 1; r < c.world_size(); ++r)
    EXPECT_TRUE(std::equal(a, a + n, a + static_cast<size_t>(r) * n)) << "rank " << r << "'s weights differ from rank 0's";
}

}  // namespace tandem::testing
