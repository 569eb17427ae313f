// The train command's memory flags (docs/memory.md): recompute, where activations live, the
// device and pinned budgets and the plan-only run (tools/commands.h).
#include "commands.h"

namespace tandem::tools {

void add_memory_options(CLI::App* c, train::TrainConfig& cfg) {
  c->add_option("--recompute", cfg.recompute,
                "Activation recompute (checkpointing): none, or blocks (each GPT-2 block or ResNet "
                "residual block keeps only its input "
                "between forward and backward and runs its forward again in backward; "
                "bit-identical results, "
                "less activation memory, one more forward of the blocks per step)")
      ->capture_default_str();
  c->add_option(
      "--device-memory-budget", cfg.device_memory_budget,
      "Device memory the run may plan for, in bytes or as 8GiB, 500MB, ...; default: the device's "
      "own "
      "(a virt device's memory_mb, a GPU's free memory). A run whose memory plan does not fit is "
      "refused before anything is allocated");
  c->add_option("--max-pinned-gb", cfg.max_pinned_gb,
                "GiB of pinned host memory (batch slots, the offloaded optimizer's state) the plan "
                "may use; a run "
                "that needs more is refused before training; 0 = no cap")
      ->capture_default_str();
  c->add_option("--max-host-gb", cfg.max_host_gb,
                "GiB of host memory (pinned and pageable: parameters' homes, the optimizer's state, batches) "
                "the plan may use; a run that needs more, with what --optimizer-state-device disk moves to disk, "
                "is refused before training with the numbers; 0 = no cap (MemAvailable still applies)")
      ->capture_default_str();
  c->add_option("--optimizer-state-device", cfg.optimizer_state_device,
                "With --optimizer-device cpu or --param-device cpu: where the f32 master weights and the "
                "optimizer's moments live: host (host memory, default) or disk (files under --offload-dir, read "
                "ahead of each bucket's or streamed part's update and written back behind it through io_uring "
                "with O_DIRECT; DeepSpeed's offload_optimizer device: nvme; bit-identical results)")
      ->capture_default_str();
  c->add_option("--offload-dir", cfg.offload_dir,
                "With --optimizer-state-device disk: the folder of its scratch files (DeepSpeed's nvme_path); on a "
                "disk's file system (O_DIRECT; not tmpfs), with room for the state; the files are removed at exit");
  c->add_option("--disk-gbps", cfg.disk_gbps,
                "With --optimizer-state-device disk, for planning: READ[,WRITE] GB/s of a modelled drive (e.g. 12,10 "
                "for one PCIe Gen5 NVMe); each request completes no earlier than that drive would finish it, and "
                "the banner gives the disk's term of the step bound");
  c->add_flag("--plan-only", cfg.plan_only,
              "Print the memory plan (bytes per category on the device and the host) and exit: 0 "
              "when it fits, "
              "1 when it does not");
  c->add_option("--activations-device", cfg.activations_device,
                "With --recompute blocks on an accelerator: where the kept block inputs wait between forward "
                "and backward: device (default), or cpu (copied to host memory during forward on a copy "
                "stream and brought back ahead of each block's backward; bit-identical results)")
      ->capture_default_str();
  c->add_option("--param-device", cfg.param_device,
                "Where a GPT's or ResNet's parameters, gradients and optimizer state live between uses: device "
                "(default), or cpu (pinned host memory, updated by the host optimizer; each block is uploaded one block "
                "ahead of its compute and its gradients go down during backward; DeepSpeed's offload_param; "
                "bit-identical results)")
      ->capture_default_str();
  c->add_option("--param-prefetch", cfg.param_prefetch,
                "With --param-device cpu: blocks uploaded ahead of the one computing, 1 to 8 (the device holds "
                "depth + 2 block slots); above 1 a block with little compute can hide the upload of a large one "
                "after it (a ResNet's last stages); auto: the deepest whose plan fits the device's budget "
                "(--device-memory-budget or its capped memory; 1 without one); results are the same at any depth")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "-1"}}))
      ->capture_default_str();
  c->add_option("--bind", cfg.bind,
                "Bind the CPU optimizer's update threads and the data workers to this rank's physical cores "
                "(local rank x cores per rank, hyper-thread siblings left out) and its pinned memory to their "
                "memory node: cores, numa (the rank's whole memory node), none (default); auto: cores when several "
                "ranks run on this machine, else none")
      ->capture_default_str();
  c->add_option("--optimizer-split", cfg.optimizer_split,
                "With --param-device cpu: the host's share of the update, in (0, 1] (DeepSpeed's Twin-Flow ratio). "
                "The parts whose gradients are final last (the embeddings or stem and head, then blocks 0, 1, ...) "
                "stay on the device and are updated there at the step's end, as many as leave the host at least "
                "this share; results are the same")
      ->capture_default_str();
}

}  // namespace tandem::tools
