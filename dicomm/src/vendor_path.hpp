// A communicator's collectives on its plugin's own collective library (ABI 1.5: NCCL, HCCL, CNCL,
// cpu-reference's shared memory) where every member's device is that plugin's and the library reaches
// them all: one library on one node, a network-scoped one anywhere. H2_DICOMM_VENDOR_COLLECTIVES
// says whether DiComm may (auto) or may not (off, the default for now) use it.
//
// The members decide together, once per communicator, at its first collective: each says which
// plugin, library and node its device is, through the store; if they all can, the first makes the
// library's unique id, the store carries it, and each joins. Every later collective of the
// communicator must then use the same device on each rank (DiComm refuses another).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "h2/plugin_comm.hpp"
#include "world.hpp"

namespace h2::dicomm::detail {

struct VendorPath {
  Device device;                     // this rank's device the communicator was decided for
  std::shared_ptr<PluginComm> comm;  // null: the library does not serve this communicator
  std::string why_not;               // then, in words
};

// The library that runs communicator `s`'s collectives on `device`, or nullptr where DiComm's own
// algorithms must. Collective over the communicator's members the first time.
PluginComm* vendor_comm(CommState& s, const Device& device);

// Issues `call` (one of `comm`'s data calls on `stream`) and waits until it has run, as DiComm's own
// collectives do, so that a failure is a CommError of this call: the job's, naming the rank, when
// the failure detector names one within a second of the library's error; else the library's
// message. Past the communicator's timeout, or once the job has failed, it aborts the library's
// communicator first.
void run_on_library(CommState& s, PluginComm& comm, Stream& stream, const std::string& what,
                    const std::function<void()>& call);

}  // namespace h2::dicomm::detail
