#include "collective_checks.hpp"

#include <string>

#include "dtype_size.hpp"
#include "h2/plugin_abi.h"
#include "plugin_error.hpp"

namespace h2::plugin {

size_t collective_element_size(uint32_t dtype) {
  const size_t size = dtype_size(dtype);
  if (size == 0) fail(H2_STATUS_INVALID_ARGUMENT, "dtype " + std::to_string(dtype) + " is not an H2_DType");
  return size;
}

void check_collective_reduction(uint32_t dtype, uint32_t op) {
  collective_element_size(dtype);
  if (op != H2_REDUCE_SUM && op != H2_REDUCE_MEAN && op != H2_REDUCE_MAX)
    fail(op == H2_REDUCE_AMAX ? H2_STATUS_UNSUPPORTED : H2_STATUS_INVALID_ARGUMENT,
         "reduction op " + std::to_string(op) + " (collectives take SUM, MEAN or MAX)");
  if (dtype == H2_DTYPE_BOOL) fail(H2_STATUS_UNSUPPORTED, "no collective reduction of BOOL");
  const bool integer = dtype == H2_DTYPE_I32 || dtype == H2_DTYPE_I64 || dtype == H2_DTYPE_U8;
  if (integer && op == H2_REDUCE_MEAN) fail(H2_STATUS_UNSUPPORTED, "no MEAN of integers (it would truncate)");
}

void check_collective_peer(int peer, int rank, int size) {
  if (peer < 0 || peer >= size || peer == rank)
    fail(H2_STATUS_INVALID_ARGUMENT, "peer " + std::to_string(peer) + " of rank " + std::to_string(rank) +
                                         " in a communicator of " + std::to_string(size));
}

bool joins_group(int depth, H2_Stream*& group_stream, H2_Stream* stream) {
  if (depth == 0) return false;
  if (group_stream != nullptr && group_stream != stream)
    fail(H2_STATUS_INVALID_ARGUMENT, "every call in one group must use the same stream");
  group_stream = stream;
  return true;
}

}  // namespace h2::plugin
