// Shared by the tests that run under mpirun (mpirun_test.cpp, mpirun_stream_test.cpp): the
// check that every rank ended with the same weights, and the small GPT they stream.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dist/dist_test_util.h"
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

/// A GPT of 3 blocks of width 32 on virt:0 (token shards in `data`: write_rule_shards), batch 2
/// per rank, 8 steps of AdamW, evaluated halfway in batches of 3.
inline train::TrainConfig small_gpt(const std::string& data) {
  train::TrainConfig c = dist_config("adamw");
  c.model = "gpt-mini";
  c.n_layer = 3, c.n_head = 2, c.n_embd = 32, c.block_size = 16;
  c.data_dir = data;
  c.batch_size = 2, c.eval_batch_size = 3;
  c.max_steps = 8, c.eval_interval = 4;
  c.device = "virt:0";
  return c;
}

}  // namespace tandem::testing
