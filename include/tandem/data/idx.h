// IDX reader: the file format of MNIST and Fashion-MNIST (LeCun et al.,
// http://yann.lecun.com/exdb/mnist/ "FILE FORMATS"). A file is: two zero bytes, a dtype code
// (0x08 = u8), the rank R (1..4), R big-endian u32 dimensions, then the payload in row-major
// order. Files may be stored raw or gzip-compressed; the two are told apart by the first bytes
// (gzip magic 1f 8b), never by the file name.
// Thread-safety: reentrant; concurrent calls on different or the same file are safe.
#pragma once

#include <string>

#include "tandem/tensor.h"

namespace tandem::data {

/// Reads an IDX file of u8 values into a host u8 tensor whose shape is the file's dimensions,
/// e.g. [60000, 28, 28] for train-images or [60000] for train-labels. Sizes are 64-bit.
/// Throws Error(io) when the file cannot be opened or read (message has strerror) or is not a
/// regular file ("expected a regular file, found a FIFO": checked before opening, which for
/// a FIFO would block), and
/// Error(format) naming the file and what was expected vs found when: the magic is wrong,
/// the dtype is not 0x08 (0x09, 0x0B-0x0E are named but not supported), the rank is outside
/// 1..4, the payload is shorter than the header promises (raw or gzip), bytes follow the
/// payload or the gzip stream, or the gzip stream is corrupt (bad data or checksum).
/// `expected_rank` > 0 also refuses, right after the magic, a file of another rank (e.g. 3 for
/// images, 1 for labels), before its dimensions are read as sizes.
Tensor read_idx(const std::string& path, int expected_rank = 0);

}  // namespace tandem::data
