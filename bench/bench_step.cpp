// Training-step throughput of a model on random data: forward, loss, backward and a plain
// SGD update (w -= lr * grad), timed after warm-up.
// Usage: bench_step [model=fmnist-cnn] [batch_size=128] [threads=2] [seconds=5] [--layers]
//        [--precision fp32|bf16|fp16] (bf16/fp16: the input and the weights' compute copies in it)
// Prints "step_img_per_s <images/s>" and, with --layers, the mean milliseconds per child
// module (forward and backward) of the Sequential.
#include <xmmintrin.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/allocator.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/nn/sequential.h"
#include "tandem/ops.h"
#include "tandem/rng.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// CPU time of the whole process in ms (all threads): on a loaded machine this, with one
// thread, is a steadier measure of the work done than wall time.
static double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  std::vector<std::string> pos;
  bool layers = false;
  std::string precision = "fp32";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--layers") == 0)
      layers = true;
    else if (std::strcmp(argv[i], "--precision") == 0 && i + 1 < argc)
      precision = argv[++i];
    else
      pos.emplace_back(argv[i]);
  }
  try {
    const std::string name = pos.size() > 0 ? pos[0] : "fmnist-cnn";
    const int64_t batch = pos.size() > 1 ? std::stoll(pos[1]) : 128;
    const int threads = pos.size() > 2 ? std::stoi(pos[2]) : 2;
    const double seconds = pos.size() > 3 ? std::stod(pos[3]) : 5.0;
    ops::set_num_threads(threads);
    if (std::getenv("BENCH_FTZ")) _mm_setcsr(_mm_getcsr() | 0x8040);

    nn::ModulePtr model = nn::make_model(name, 0);
    auto* seq = dynamic_cast<nn::Sequential*>(model.get());
    nn::CrossEntropyLoss loss_fn;
    Tensor x = Tensor::empty({batch, 1, 28, 28});
    Tensor y = Tensor::empty({batch}, DType::i64);
    Philox rng(1, 0);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 2.0f * rng.uniform() - 1.0f;
    for (int64_t i = 0; i < batch; ++i) y.data<int64_t>()[i] = rng.randint(10);
    const DType dt = precision == "bf16" ? DType::bf16 : precision == "fp16" ? DType::f16 : DType::f32;
    if (dt != DType::f32) {
      model->set_compute_dtype(dt);
      x = x.to(dt);
    }
    std::vector<nn::Parameter*> params = model->parameters();
    const size_t nl = seq ? seq->size() : 0;
    std::vector<double> fwd_ms(nl, 0.0), bwd_ms(nl, 0.0), fwd_cpu(nl, 0.0), bwd_cpu(nl, 0.0);

    auto step = [&](bool timed) {
      model->zero_grad();
      Tensor h = x;
      if (layers && seq) {
        for (size_t i = 0; i < nl; ++i) {
          if (seq->fused_away(i)) continue;
          auto t = Clock::now();
          const double c = cpu_ms();
          h = (*seq)[i]->forward(h);
          if (timed) fwd_ms[i] += ms_since(t), fwd_cpu[i] += cpu_ms() - c;
        }
      } else {
        h = model->forward(x);
      }
      loss_fn.forward(h, y);
      Tensor g = loss_fn.backward();
      if (layers && seq) {
        for (size_t i = nl; i-- > 0;) {
          if (seq->fused_away(i)) continue;
          auto t = Clock::now();
          const double c = cpu_ms();
          g = (*seq)[i]->backward(g);
          if (timed) bwd_ms[i] += ms_since(t), bwd_cpu[i] += cpu_ms() - c;
        }
      } else {
        model->backward(g);
      }
      for (nn::Parameter* p : params) {
        ops::add_(p->value, p->grad, -0.01f);
        if (p->compute.defined()) p->compute = p->value.to(dt);  // the optimizer's low-precision copy
      }
    };

    for (int i = 0; i < 5; ++i) step(false);
    const uint64_t allocs0 = host_allocator().stats().num_allocs;
    int steps = 0;
    const auto t0 = Clock::now();
    const double c0 = cpu_ms();
    while (ms_since(t0) < seconds * 1000.0) {
      step(true);
      ++steps;
    }
    const double total = ms_since(t0), total_cpu = cpu_ms() - c0;
    const double allocs_per_step = static_cast<double>(host_allocator().stats().num_allocs - allocs0) / steps;
    std::printf("precision %s ", precision.c_str());
    std::printf("model %s batch_size %lld threads %d steps %d step_ms %.2f step_cpu_ms %.2f allocs_per_step %.1f\n",
                name.c_str(), static_cast<long long>(batch), threads, steps, total / steps, total_cpu / steps,
                allocs_per_step);
    if (layers && seq) {
      for (size_t i = 0; i < nl; ++i)
        std::printf("  %-2zu %-28.28s fwd %7.2f ms (cpu %7.2f)  bwd %7.2f ms (cpu %7.2f)%s\n", i,
                    (*seq)[i]->describe().c_str(), fwd_ms[i] / steps, fwd_cpu[i] / steps, bwd_ms[i] / steps,
                    bwd_cpu[i] / steps, seq->fused_away(i) ? "  (fused into previous)" : "");
    }
    std::printf("step_img_per_s %.0f\n", batch * steps / (total / 1000.0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
