// The argument checks every plugin's collective section (plugin_abi.h section 9) makes at the call,
// whatever library runs the work: the same refusals, with the same words, from cpu-reference's
// shared memory, the CUDA plugin's NCCL and the emulators' HCCL and CNCL.
#pragma once

#include <cstddef>
#include <cstdint>

#include "h2/plugin_abi.h"

namespace h2::plugin {

// Bytes per element of `dtype`; throws PluginError(INVALID_ARGUMENT) for a value that is no H2_DType.
size_t collective_element_size(uint32_t dtype);
// Throws PluginError(UNSUPPORTED) for a dtype or op collectives do not reduce (MEAN of integers,
// which would truncate; BOOL; AMAX), or INVALID_ARGUMENT for a value that is no H2_ReduceOp.
void check_collective_reduction(uint32_t dtype, uint32_t op);
// Throws PluginError(INVALID_ARGUMENT) unless `peer` is another rank of a communicator of `size`
// ranks in which this one is `rank`.
void check_collective_peer(int peer, int rank, int size);
// Whether a group is open (`depth` > 0), which then takes a call on `stream`: every call of one
// group uses one stream (`group_stream`, nullptr until the group's first call, set by it). Throws
// PluginError(INVALID_ARGUMENT) for a call on another.
bool joins_group(int depth, H2_Stream*& group_stream, H2_Stream* stream);

}  // namespace h2::plugin
