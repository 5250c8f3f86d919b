// Byte sizes as command-line values: a whole number of bytes with an optional binary unit, as
// nccl-tests' `-b 8 -e 128M` takes them ("4096", "16M", "16MiB", "1g"). One parser for every option
// that takes bytes, so they all accept and refuse the same things.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace h2::tools {

// Units, case-insensitive: none or B (bytes), K or KiB (1024), M or MiB, G or GiB, T or TiB. KB, MB,
// GB and TB are refused rather than guessed: elsewhere they mean powers of 1000 (cpu-reference's
// memory option), and a size off by 5% must not pass unseen. Throws std::invalid_argument with the
// reason (without the option's name, which the caller adds) for anything else: an empty text, a
// sign, a fraction, an unknown unit, more than 2^64 - 1 bytes.
uint64_t parse_byte_size(std::string_view text);

// "16MiB" when `bytes` is a whole number of the largest such unit, else the plain number.
std::string byte_size_text(uint64_t bytes);

}  // namespace h2::tools
