#include "tandem/device.h"

#include <cstdlib>

#include "tandem/error.h"

namespace tandem {

const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::cuda: return "cuda";
    case DeviceKind::virt: return "virt";
  }
  return "?";
}

std::string Device::str() const {
  if (kind == DeviceKind::cpu) return "cpu";
  return std::string(device_kind_name(kind)) + ":" + std::to_string(index);
}

static const char* kDeviceSyntax = "expected cpu, cuda[:N] or virt[:N][?key=value&...]";

DeviceSpec DeviceSpec::parse(const std::string& text) {
  DeviceSpec spec;
  std::string head = text, query;
  if (auto q = text.find('?'); q != std::string::npos) {
    head = text.substr(0, q);
    query = text.substr(q + 1);
  }
  std::string kind = head, index;
  if (auto c = head.find(':'); c != std::string::npos) {
    kind = head.substr(0, c);
    index = head.substr(c + 1);
  }
  if (kind == "cpu") {
    spec.device.kind = DeviceKind::cpu;
  } else if (kind == "cuda") {
    spec.device.kind = DeviceKind::cuda;
  } else if (kind == "virt") {
    spec.device.kind = DeviceKind::virt;
  } else {
    throw_error(ErrorCode::invalid_argument, "device",
                "unknown device '" + text + "': " + kDeviceSyntax);
  }
  TD_CHECK_ARG(head.find(':') == std::string::npos || !index.empty(), "device",
               "bad device '{}': a ':' with no index after it: {}", text, kDeviceSyntax);
  TD_CHECK_ARG(text.find('?') == std::string::npos || !query.empty(), "device",
               "bad device '{}': a '?' with no options after it: {}", text, kDeviceSyntax);
  if (!index.empty()) {
    char* end = nullptr;
    long v = std::strtol(index.c_str(), &end, 10);
    TD_CHECK_ARG(*end == '\0' && v >= 0 && v < 1024, "device", "bad device index in '{}': {}", text,
                 kDeviceSyntax);
    spec.device.index = static_cast<int>(v);
  }
  TD_CHECK_ARG(spec.device.kind != DeviceKind::cpu || spec.device.index == 0, "device",
               "cpu has one device: expected cpu or cpu:0, got '{}'", text);
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    size_t eq = kv.find('=');
    TD_CHECK_ARG(eq != std::string::npos && eq > 0, "device", "bad option '{}' in '{}': {}", kv,
                 text, kDeviceSyntax);
    const std::string key = kv.substr(0, eq);
    TD_CHECK_ARG(!spec.options.count(key), "device", "option '{}' given twice in '{}': expected each option once",
                 key, text);
    spec.options[key] = kv.substr(eq + 1);
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return spec;
}

double DeviceSpec::option(const std::string& key, double fallback) const {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  TD_CHECK_ARG(!it->second.empty() && *end == '\0', "device", "option {}='{}' is not a number", key,
               it->second);
  return v;
}

}  // namespace tandem
