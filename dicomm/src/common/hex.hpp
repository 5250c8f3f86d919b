// Bytes as lower-case hex text and back: how DiComm puts binary values (endpoint addresses, a plugin
// library's unique id) into the rendezvous store, whose values are text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace h2::dicomm::detail {

inline std::string hex(std::span<const uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string text;
  for (uint8_t b : bytes) {
    text += digits[b >> 4];
    text += digits[b & 15];
  }
  return text;
}

// The bytes of text that hex() wrote (an odd last digit is ignored).
inline std::vector<uint8_t> unhex(const std::string& text) {
  std::vector<uint8_t> bytes(text.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  return bytes;
}

}  // namespace h2::dicomm::detail
