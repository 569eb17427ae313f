#include "train/place/place_model.h"

#include <memory>
#include <vector>

#include "tandem/error.h"
#include "tandem/nn/sequential.h"
#include "tandem/stream.h"
#include "train/place/placed_blocks.h"
#include "train/place/placed_model.h"

namespace tandem::train {

void place_model(Run& r, const TrainConfig& cfg, bool distributed) {
  TD_CHECK_ARG(cfg.devices.empty() && !distributed && cfg.optimizer_device != "cpu", "train",
               "--place {}: expected one process and neither --devices nor --optimizer-device cpu",
               cfg.place);
  const nn::ModelBlocks blocks = r.model->blocks();  // placed by blocks: the rest stays at home
  std::shared_ptr<nn::Sequential> seq;
  std::vector<DeviceSpec> specs;
  if (blocks.places_blocks) {
    specs = parse_block_place(cfg.place, blocks, r.device);
  } else {
    seq = std::dynamic_pointer_cast<nn::Sequential>(r.model);
    TD_CHECK_ARG(seq != nullptr, "train",
                 "--place: model {} is not a chain of modules (a Sequential)", cfg.model);
    seq = place_chain(cfg.place, seq);
    specs = parse_place(cfg.place, *seq, r.device);
  }
  std::vector<Device> devices;
  for (const DeviceSpec& spec : specs) {
    try {
      configure_device(spec);
      if (!spec.device.is_host()) runtime_for(spec.device);
    } catch (const Error& e) {
      rethrow_naming_flag(e, "train", "--place", cfg.place);
    }
    devices.push_back(spec.device);
  }
  if (blocks.places_blocks) {
    r.placement = place_blocks(*r.model, devices, r.device);
    return;
  }
  auto placed = std::make_shared<PlacedModel>(seq, devices);
  r.placement = placed->describe_placement();
  r.device = placed->output_device();
  r.model = placed;
}

}  // namespace tandem::train
