// validate_checkpoint_flags (tandem/train/config.h).
#include <sys/stat.h>

#include <string>

#include "tandem/error.h"
#include "tandem/train/config.h"

namespace tandem::train {

bool sharded_checkpoints(const TrainConfig& c) {
  return c.checkpoint_format == "sharded" ||
         (c.checkpoint_format == "auto" && c.zero == 1 && c.optimizer_device != "device");
}

void validate_checkpoint_flags(const TrainConfig& c, const char* op) {
  TD_CHECK_ARG(c.checkpoint_format == "auto" || c.checkpoint_format == "whole" || c.checkpoint_format == "sharded",
               op, "--checkpoint-format: expected whole, sharded or auto, got '{}'", c.checkpoint_format);
  TD_CHECK_ARG(c.checkpoint_dir.empty() || !sharded_checkpoints(c) || c.offload_delay == 0, op,
               "--checkpoint-format sharded with --offload-delay 1: not supported (the pending update's weights "
               "are not sharded); expected --offload-delay 0 or --checkpoint-format whole");
  TD_CHECK_ARG(c.checkpoint_every >= 0, op, "--checkpoint-every: expected 0 (epoch ends only) or a number of steps, got {}",
               c.checkpoint_every);
  TD_CHECK_ARG(c.keep_checkpoints >= 1, op, "--keep-checkpoints: expected at least 1, got {}", c.keep_checkpoints);
  TD_CHECK_ARG(c.checkpoint_every == 0 || !c.checkpoint_dir.empty(), op,
               "--checkpoint-every {}: expected --checkpoint-dir too (where to write them)", c.checkpoint_every);
  if (c.checkpoint_dir.empty()) return;
  struct stat st {};
  if (::stat(c.checkpoint_dir.c_str(), &st) == 0) {
    TD_CHECK_ARG(S_ISDIR(st.st_mode), op, "--checkpoint-dir {}: expected a folder, found a file", c.checkpoint_dir);
    return;
  }
  std::string parent = c.checkpoint_dir;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  const size_t slash = parent.rfind('/');
  parent = slash == std::string::npos ? "." : slash == 0 ? "/" : parent.substr(0, slash);
  TD_CHECK_ARG(::stat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode), op,
               "--checkpoint-dir {}: expected an existing folder or a new one in an existing folder ({} is not one)",
               c.checkpoint_dir, parent);
}

}  // namespace tandem::train
