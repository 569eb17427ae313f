// The offloaded optimizer with its master copy and state on disk (OffloadOptions::disk_dir)
// against the same optimizer with them in pinned memory: after several steps on virt the
// device parameters, state() and master_params() are bit for bit the same, for adamw (f32 and
// bf16 moments) and sgd with momentum, with many small buckets (the window far smaller than
// the state); a state loaded into the disk tier trains on as the pinned one does.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/virt_test_util.h"
#include "data/temp_dir.h"
#include "tandem/optim/offload.h"
#include "tandem/storage/disk_store.h"

namespace tandem::optim {
namespace {

using tandem::testing::on;
using tandem::testing::random_host;
using tandem::testing::TempDir;
using tandem::testing::to_host;

constexpr Device kVirt{DeviceKind::virt, 0};

bool bit_equal(const Tensor& a, const Tensor& b) {
  const Tensor ha = to_host(a), hb = to_host(b);
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

const std::vector<Shape> kShapes{{1}, {7}, {1023}, {33, 31}, {5000}, {17}, {3000}, {64, 64}};

struct Params {
  std::vector<std::unique_ptr<nn::Parameter>> ps;
  std::vector<nn::Parameter*> ptrs() const {
    std::vector<nn::Parameter*> v;
    for (const auto& p : ps) v.push_back(p.get());
    return v;
  }
};

Params make_params() {
  Params out;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    auto p = std::make_unique<nn::Parameter>();
    p->name = fmt::format("p{}", i);
    p->value = on(kVirt, random_host(kShapes[i], 10 + i));
    p->grad = on(kVirt, Tensor::zeros(kShapes[i]));
    p->decay = i != 2;
    out.ps.push_back(std::move(p));
  }
  return out;
}

void set_grads(const Params& p, int k) {
  for (size_t i = 0; i < p.ps.size(); ++i)
    p.ps[i]->grad = on(kVirt, random_host(p.ps[i]->value.shape(), 1000 * static_cast<uint64_t>(k) + i));
}

void run_steps(OffloadOptimizer& opt, const Params& p, int from, int to) {
  for (int k = from; k < to; ++k) {
    set_grads(p, k);
    opt.step();
  }
  opt.flush();
}

TEST(OffloadDisk, DiskStateGivesThePinnedStatesBits) {
  for (const std::string name : {"adamw", "sgd"}) {
    for (const DType moments : {DType::f32, DType::bf16}) {
      if (name == "sgd" && moments == DType::bf16) continue;
      SCOPED_TRACE(name);
      SCOPED_TRACE(dtype_name(moments));
      TempDir dir;
      OptimizerOptions o;
      o.lr = 0.01;
      o.weight_decay = 0.1;
      o.momentum = 0.9;
      o.moments_dtype = moments;
      OffloadOptions pinned;
      pinned.bucket_cap_mb = 0.02;  // 5,242 floats: many buckets
      OffloadOptions disk = pinned;
      disk.disk_dir = dir.str();
      disk.disk_read_ahead = 1;
      const Params a = make_params(), b = make_params();
      OffloadOptimizer pa(name, a.ptrs(), o, pinned), pb(name, b.ptrs(), o, disk);
      ASSERT_NE(pb.disk_store(), nullptr);
      EXPECT_EQ(pa.disk_store(), nullptr);
      EXPECT_GE(pb.layout().buckets, 4);
      // The files hold the master copy and the moments or momentum (4 + 8, or 4 + 4, or 4 + 4 bytes).
      int64_t elements = 0;
      for (const Shape& s : kShapes) elements += shape_numel(s);
      const int64_t per = name == "sgd" ? 8 : moments == DType::bf16 ? 8 : 12;
      EXPECT_GE(pb.layout().disk_bytes, static_cast<uint64_t>(per * elements));
      EXPECT_NE(pb.layout().disk.find("requests"), std::string::npos) << pb.layout().disk;
      EXPECT_TRUE(std::filesystem::is_empty(dir.str()));  // unlinked scratch
      run_steps(pa, a, 0, 6);
      run_steps(pb, b, 0, 6);
      for (size_t i = 0; i < a.ps.size(); ++i) EXPECT_TRUE(bit_equal(a.ps[i]->value, b.ps[i]->value)) << i;
      const auto sa = pa.state(), sb = pb.state();
      ASSERT_EQ(sa.size(), sb.size());
      for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(bit_equal(sa[i].tensor, sb[i].tensor)) << sa[i].name;
      // A state loaded into a fresh disk tier trains on to the same bits.
      TempDir dir2;
      OffloadOptions disk2 = disk;
      disk2.disk_dir = dir2.str();
      const Params c = make_params();
      for (size_t i = 0; i < c.ps.size(); ++i) c.ps[i]->value = on(kVirt, to_host(a.ps[i]->value));
      OffloadOptimizer pc(name, c.ptrs(), o, disk2);
      std::vector<nn::NamedTensor> copy;
      for (const auto& t : sa) copy.push_back({t.name, to_host(t.tensor).clone(), false});
      pc.load_state(copy, pa.step_count());
      run_steps(pa, a, 6, 9);
      run_steps(pc, c, 6, 9);
      for (size_t i = 0; i < a.ps.size(); ++i) EXPECT_TRUE(bit_equal(a.ps[i]->value, c.ps[i]->value)) << i;
      const storage::DiskFigures f = pc.disk_store()->figures();
      EXPECT_GT(f.bytes_read, 0u);
      EXPECT_GT(f.bytes_written, 0u);
    }
  }
}

TEST(OffloadDisk, RefusesDelayAndShards) {
  TempDir dir;
  const Params a = make_params();
  OffloadOptions off;
  off.disk_dir = dir.str();
  off.delay = 1;
  EXPECT_THROW(OffloadOptimizer("adamw", a.ptrs(), {}, off), Error);
}

}  // namespace
}  // namespace tandem::optim
