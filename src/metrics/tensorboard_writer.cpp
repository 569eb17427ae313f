#include "tandem/metrics/tensorboard.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <isa-l/crc.h>

#include "tandem/error.h"
#include "tensorboard_event.pb.h"

namespace tandem::metrics {

uint32_t crc32c(const void* data, size_t size) {
  // ISA-L's crc32_iscsi takes the running value without the initial and final inversion.
  uint32_t crc = 0xffffffffu;
  const auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    const int n = static_cast<int>(std::min<size_t>(size, 1u << 30));
    crc = crc32_iscsi(const_cast<unsigned char*>(p), n, crc);
    p += n;
    size -= static_cast<size_t>(n);
  }
  return crc ^ 0xffffffffu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TD_CHECK(!ec && std::filesystem::is_directory(dir), ErrorCode::io, "tensorboard",
           "{}: expected a folder that can be made or written, got: {}", dir,
           ec ? ec.message() : "not a folder");
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const auto secs = static_cast<long long>(wall_time_now());
  path_ = (std::filesystem::path(dir) / fmt::format("events.out.tfevents.{}.{}.{}.tandem", secs, host, ::getpid()))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  TD_CHECK(file_ != nullptr, ErrorCode::io, "tensorboard", "{}: cannot create the event file: {}", path_,
           std::strerror(errno));
  tb::Event first;
  first.set_wall_time(wall_time_now());
  first.set_file_version("brain.Event:2");
  try {
    write_record(first.SerializeAsString());
  } catch (...) {
    std::fclose(file_);
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  tb::Event e;
  e.set_wall_time(wall_time_now());
  e.set_step(step);
  tb::Summary* s = e.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    tb::SummaryValue* v = s->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(e.SerializeAsString());
}

void TensorBoardWriter::write_record(const std::string& data) {
  unsigned char head[12];
  const uint64_t len = data.size();
  for (int i = 0; i < 8; ++i) head[i] = static_cast<unsigned char>(len >> (8 * i));  // little-endian
  const uint32_t len_crc = masked_crc32c(head, 8), data_crc = masked_crc32c(data.data(), data.size());
  for (int i = 0; i < 4; ++i) head[8 + i] = static_cast<unsigned char>(len_crc >> (8 * i));
  unsigned char tail[4];
  for (int i = 0; i < 4; ++i) tail[i] = static_cast<unsigned char>(data_crc >> (8 * i));
  const bool ok = std::fwrite(head, 1, sizeof head, file_) == sizeof head &&
                  std::fwrite(data.data(), 1, data.size(), file_) == data.size() &&
                  std::fwrite(tail, 1, sizeof tail, file_) == sizeof tail && std::fflush(file_) == 0;
  TD_CHECK(ok, ErrorCode::io, "tensorboard", "{}: write failed: {}", path_, std::strerror(errno));
}

}  // namespace tandem::metrics
