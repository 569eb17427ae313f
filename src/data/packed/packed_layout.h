// Byte-level pieces of the packed shard layout (include/tandem/data/packed.h): little-endian
// integers, the header, index entries and the footer, each encoded and decoded in one place.
#pragma once

#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "tandem/data/packed.h"

namespace tandem::data::packed {

inline constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'P', 'A', 'C', 'K'};
inline constexpr char kEndMagic[8] = {'T', 'N', 'D', 'M', 'E', 'N', 'D', '\0'};
inline constexpr const char* kManifest = "manifest.json";
inline constexpr const char* kFormatName = "tandem-packed";

inline void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline uint32_t crc32_of(const uint8_t* p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt step = static_cast<uInt>(n > (1u << 30) ? (1u << 30) : n);
    c = crc32(c, p, step);
    p += step;
    n -= step;
  }
  return static_cast<uint32_t>(c);
}

struct Header {
  uint32_t version = kPackedVersion;
  uint32_t channels = 0, height = 0, width = 0, num_classes = 0;
};

inline std::array<uint8_t, kPackedHeaderBytes> encode_header(const Header& h) {
  std::array<uint8_t, kPackedHeaderBytes> b{};
  std::memcpy(b.data(), kMagic, 8);
  put_u32(b.data() + 8, h.version);
  put_u32(b.data() + 12, static_cast<uint32_t>(kPackedHeaderBytes));
  put_u32(b.data() + 16, h.channels);
  put_u32(b.data() + 20, h.height);
  put_u32(b.data() + 24, h.width);
  put_u32(b.data() + 28, h.num_classes);
  put_u32(b.data() + 60, crc32_of(b.data(), 60));
  return b;
}

struct Entry {
  uint64_t offset = 0;
  uint32_t size = 0, crc = 0, label = 0;
  uint8_t encoding = 0;
};

inline void encode_entry(const Entry& e, uint8_t* p) {
  std::memset(p, 0, kPackedIndexEntryBytes);
  put_u64(p, e.offset);
  put_u32(p + 8, e.size);
  put_u32(p + 12, e.crc);
  put_u32(p + 16, e.label);
  p[20] = e.encoding;
}
inline Entry decode_entry(const uint8_t* p) {
  return {get_u64(p), get_u32(p + 8), get_u32(p + 12), get_u32(p + 16), p[20]};
}

struct Footer {
  uint64_t records = 0, index_offset = 0;
  uint32_t index_crc = 0;
};

inline std::array<uint8_t, kPackedFooterBytes> encode_footer(const Footer& f) {
  std::array<uint8_t, kPackedFooterBytes> b{};
  put_u64(b.data(), f.records);
  put_u64(b.data() + 8, f.index_offset);
  put_u32(b.data() + 16, f.index_crc);
  put_u32(b.data() + 20, crc32_of(b.data(), 20));
  std::memcpy(b.data() + 24, kEndMagic, 8);
  return b;
}

inline uint8_t encoding_code(Encoding e) { return static_cast<uint8_t>(e); }

}  // namespace tandem::data::packed
