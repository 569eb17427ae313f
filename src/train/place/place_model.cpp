#include "train/place/place_model.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "tandem/error.h"
#include "tandem/nn/sequential.h"
#include "tandem/stream.h"
#include "train/place/placed_blocks.h"
#include "train/place/placed_model.h"

namespace tandem::train {

void place_model(Run& r, const TrainConfig& cfg, bool distributed) {
  TD_CHECK_ARG(cfg.devices.empty() && cfg.optimizer_device != "cpu", "train",
               "--place {}: expected neither --devices nor --optimizer-device cpu", cfg.place);
  TD_CHECK_ARG(!distributed || cfg.zero == 0, "train",
               "--place {} with --zero {}: not supported yet (the owners' broadcasts of the updated parameters "
               "would run on each device's stream, in no order fixed across the ranks); expected --zero 0",
               cfg.place, cfg.zero);
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

void broadcast_placed_model(const comm::CommunicatorPtr& comm, nn::Module& model) {
  std::vector<std::pair<Device, comm::CommunicatorPtr>> comms;  // one per device, made when first used
  for (const nn::NamedTensor& nt : model.state_dict()) {
    if (!nt.tensor.defined() || nt.tensor.numel() == 0) continue;
    const Device d = nt.tensor.device();
    auto it = std::find_if(comms.begin(), comms.end(), [d](const auto& c) { return c.first == d; });
    if (it == comms.end()) it = comms.insert(comms.end(), {d, comm::for_device(comm, d)});
    const Stream s = runtime_for(d).default_stream(d.index);
    if (!nt.tensor.storage()->pending_write().query()) s.wait(nt.tensor.storage()->pending_write());
    it->second->broadcast(nt.tensor, 0, s);
    s.synchronize();  // one collective at a time, in state-dict order on every rank
  }
}

}  // namespace tandem::train
