// TrainConfig: everything `tandem train` and `tandem eval` take, with their defaults.
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::train {

/// Debian's dataset-fashion-mnist installs the four IDX files here.
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

struct TrainConfig {
  std::string data_dir = kDefaultDataDir;  // folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  std::string dataset = "auto";            // auto (told by content) | fashion-mnist | cifar10 | cifar100 | folder | packed
  std::string label = "fine";              // cifar100: fine (100 classes) | coarse (20)
  double val_split = 0.0;                  // image folder without train/ and val/: fraction held out (0, 1)
  int64_t image_size = 0;                  // side of the square input; 0 = the dataset's (image folders: 224)
  int64_t resize_size = 0;                 // evaluation: shorter side before the center crop; 0 = image_size * 256 / 224
  std::vector<float> mean, std;            // Normalize per channel; empty = the dataset's (ImageNet's for folders)
  bool skip_corrupt = false;               // replace undecodable samples and list them each epoch
  std::string shuffle = "full";            // full (RandomSampler) | block (page-aware, packed shards)
  std::string model = "fmnist-cnn";        // fmnist-cnn | mlp | resnet18 | resnet34 | resnet50 | resnet18-cifar
  bool zero_init_residual = false;         // ResNets: each block's last BatchNorm weight starts at 0
  // Sequence models: sizes replacing the named model's (0 = the model's; vocab_size 0 = the
  // token shards'). block_size is both the window of tokens per sample and the position table.
  int64_t n_layer = 0, n_head = 0, n_embd = 0, block_size = 0, vocab_size = 0;
  std::string init;                        // safetensors file to start from ("" = the model's init)
  std::vector<std::string> init_exclude;   // state-dict name prefixes not taken from --init (e.g. "fc.")
  int epochs = 5;
  // Runs counted in optimizer steps (language models): max_steps > 0 ends the run after that
  // many optimizer steps (epochs then follow from it; the schedule spans max_steps), and
  // eval_interval > 0 evaluates on the validation split before the first step and every that
  // many steps. grad_accum_steps micro-batches of batch_size each make one optimizer step
  // (gradients summed and scaled by 1 / grad_accum_steps: the mean over all of them; with the
  // optimizer offloaded, data parallel (the gradients reduced once per step) and the batch
  // split too, not with param_device "cpu"); an epoch has floor(batches / grad_accum_steps)
  // steps (the batches left over are skipped, and the next epoch starts at its first batch).
  int64_t max_steps = 0;
  int64_t eval_interval = 0;
  int64_t grad_accum_steps = 1;
  int64_t batch_size = 128;                // samples per step
  int64_t eval_batch_size = 512;           // samples per evaluation batch
  double lr = 2e-3;                        // peak learning rate
  std::string optimizer = "adamw";         // sgd | adam | adamw
  std::string optimizer_moments = "fp32";  // adam, adamw: exp_avg and exp_avg_sq in fp32 | bf16 (stochastic rounding)
  double weight_decay = 0.05;              // AdamW: decoupled; Adam/SGD: L2
  bool no_decay_bn_bias = false;           // no weight decay on 1-d parameters (BatchNorm weight/bias, biases)
  double momentum = 0.9;                   // SGD only
  bool nesterov = false;                   // SGD only
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam/AdamW
  std::string schedule = "cosine";         // constant | step | cosine | one-cycle
  double warmup_epochs = 0.2;              // linear warmup before cosine (fraction of epochs allowed)
  int64_t warmup_steps = -1;               // the same in optimizer steps; -1: use warmup_epochs
  double pct_start = 0.3;                  // one-cycle: share of the steps spent rising to --lr
  int step_size_epochs = 2;                // step schedule: decay every this many epochs
  double gamma = 0.1;                      // step schedule: decay factor
  double label_smoothing = 0.0;
  int num_workers = 1;                     // loader threads; 0 loads in the training thread; -1 auto
  int prefetch_factor = 2;                 // batches in flight per worker; -1 auto (also the device
                                           // prefetch depth), see data/autotune.h
  uint64_t seed = 0;
  int threads = 0;                         // compute threads; 0 = all available cores
  std::string device = "cpu";              // cpu | cuda[:N] | virt[:N][?options]
  std::string devices;                     // D1,D2,...: one step's batch split between them ("" = --device only)
  std::string split = "auto";              // with devices: auto (by measured speed) | W1,W2,... (fixed weights)
  std::string place;                       // PREFIX=DEVICE,...: modules from PREFIX on go to DEVICE ("" = all on --device)
  std::string optimizer_device = "device"; // device (optimizer beside the parameters) | cpu (offloaded)
  double bucket_cap_mb = 25.0;             // MiB of fp32 gradient per bucket (offloaded optimizer; all-reduce)
  double dist_timeout = 300;               // mpirun: seconds a rank waits for its peers in one collective
  std::string bind = "none";               // update threads and data workers: none | cores | numa | auto
                                           // (auto: cores with several ranks on this machine, else none)
  std::string grad_compression = "none";   // mpirun: none | fp16 | bf16 | topk:RATIO (error feedback)
  int zero = 0;                            // mpirun: 1 = optimizer state partitioned over the ranks (ZeRO-1);
                                           // 3 = with --param-device cpu, every host state sharded (ZeRO-3)
  int offload_delay = 0;                   // offloaded optimizer: 0, or 1 (one-step delayed update)
  int64_t offload_delay_warmup = 0;        // offloaded optimizer, delay 1: steps without delay first
  // Memory (docs/memory.md, tandem/train/memory_plan.h): activation recompute, and the limits
  // the memory plan is checked against before anything is allocated.
  std::string recompute =
      "none";  // none | blocks (GPT-2 blocks keep only their input; recomputed in backward)
  std::string activations_device = "device";  // device | cpu: where recompute's kept block inputs wait
  std::string param_device = "device";        // device | cpu: the parameters' home (cpu: streamed per block)
  int param_prefetch = 1;  // --param-device cpu: blocks uploaded ahead of the one computing (1..8; -1: auto,
                           // the deepest the device budget fits)
  double optimizer_split = 1.0;  // --param-device cpu: the host's share of the update (the rest on the device)
  std::string device_memory_budget;  // bytes or a size ("21.8GiB"); "" = the device's (virt
                                     // memory_mb, cuda free)
  double max_pinned_gb = 0;          // GiB of pinned host memory the plan may use; 0 = no cap
  // The disk tier (docs/disk-offload.md): where the offloaded optimizer's f32 master weights and
  // moments live (host | disk: files under offload_dir), and the host memory the plan may use.
  std::string optimizer_state_device = "host";
  std::string offload_dir;           // --offload-dir: the disk tier's folder
  double max_host_gb = 0;            // GiB of host memory (pinned and pageable) the plan may use; 0 = no cap
  std::string disk_gbps;             // --disk-gbps R[,W]: a modelled drive's read and write GB/s ("" = none)
  bool plan_only = false;            // print the memory plan and exit
  // Mixed precision (docs/mixed-precision.md): convolutions, matrix products and activations
  // in bf16 or f16; batch-norm statistics, loss and softmax in f32; f32 master weights.
  std::string precision = "fp32";          // fp32 | bf16 | fp16
  std::string loss_scale = "auto";         // auto (dynamic for fp16, none otherwise) | dynamic | none
  double loss_scale_init = 65536.0;        // dynamic loss scaling: the first step's scale (GradScaler's init_scale)
  double clip_grad_norm = 0.0;             // > 0: clip the global L2 norm of the gradients to this (0 = off)
  std::string save_dtype = "fp32";         // --save: fp32 (master weights) | bf16
  std::string simd;                        // optimizer kernels: scalar | avx2 | avx512 ("" = TANDEM_SIMD or best)
  std::string save;                        // safetensors file for the trained weights ("" = none)
  std::string weights;                     // eval: safetensors file to evaluate
  std::string trace;                       // Chrome-trace JSON of the run's stages ("" = none)
  std::string metrics_file;                // JSON-lines metrics, one record per read-back and epoch ("" = none)
  std::string tensorboard;                 // folder for TensorBoard event files ("" = none)
  bool show_utilization = false;           // CPU, loader and device utilisation in the epoch line
  bool augment = true;                     // pad-2 random crop + horizontal flip
  int progress = -1;
  int64_t log_interval = 10;               // steps between asynchronous loss/accuracy read-backs (K)                       // -1 auto (live bar on a terminal), 0 off, 1 on
  // Checkpoints (src/train/checkpoint/): a folder, written at every epoch's end and every
  // checkpoint_every steps (0 = epoch ends only), keeping the newest keep_checkpoints.
  std::string checkpoint_dir;              // "" = no checkpoints
  int64_t checkpoint_every = 0;            // steps between checkpoints; 0 = at epoch ends only
  int keep_checkpoints = 3;                // checkpoints kept in checkpoint_dir (>= 1)
  // "whole" (one file, rank 0 writes), "sharded" (every rank writes its shard: shard_files.h),
  // "auto" (sharded where no rank holds the whole state: --zero 1 --optimizer-device cpu).
  std::string checkpoint_format = "auto";
  std::string resume;                      // checkpoint file or folder to continue from ("" = none)
  bool force = false;                      // resume even when flags that change the math differ
  // Online samples (tandem/train/online_samples.h): the share of each training batch replaced
  // by samples drawn from the run's online source (POST /v1/samples under --serve).
  double online_mix = 0.0;                 // [0, 1); 0 = none
  // The resolved configuration as a TOML run file (`tandem train --print-config`'s text:
  // docs/run-files.md), recorded in every checkpoint's state as "run_config"; "" when the run
  // was not configured from the command line. No effect on training.
  std::string run_config;
};

/// Checks ranges and names, and that --save and --trace (when set) name a regular file or a new
/// path in an existing, writable folder, and not the same path, so a run cannot end in an
/// unwritable output (nor replace a device node or FIFO with a file); throws
/// Error(invalid_argument, "[train] --flag: expected ..., got ...").
/// `command` ("train" or "eval") tags the errors and names eval's flags (`eval --batch-size`
/// sets eval_batch_size).
void validate(const TrainConfig& c, const char* command = "train");

/// The flags as the run reads them: what one flag implies of another is written out.
/// --param-device cpu runs the optimizer on the host already, so --optimizer-device cpu beside
/// it adds nothing: it becomes "device" (the run is the streamed one either way). Throws nothing.
TrainConfig with_implied_flags(TrainConfig c);

/// Whether the run's checkpoints are sharded (--checkpoint-format, "auto" resolved).
bool sharded_checkpoints(const TrainConfig& c);
/// The disk tier's flags of validate() (--optimizer-state-device, --offload-dir, --max-host-gb):
/// their values and the flags they need, and the folder (storage::check_offload_dir without the
/// space, which the optimizer checks once it knows its size). Throws Error(invalid_argument).
void validate_disk_flags(const TrainConfig& c, const char* command = "train");
/// --disk-gbps R[,W] as {read, write} GB/s (W = R when left out; {0, 0} for ""). Throws
/// Error(invalid_argument) naming the flag for anything but one or two numbers > 0.
std::pair<double, double> parse_disk_gbps(const std::string& text);

/// The checkpoint flags of validate(): --checkpoint-every >= 0, --keep-checkpoints >= 1,
/// --checkpoint-format whole|sharded|auto (sharded not with --offload-delay 1),
/// --checkpoint-every only with --checkpoint-dir, --checkpoint-dir an existing folder or a new
/// one in an existing folder. Throws Error(invalid_argument) naming the flag.
void validate_checkpoint_flags(const TrainConfig& c, const char* command = "train");

}  // namespace tandem::train
