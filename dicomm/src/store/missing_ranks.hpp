// Which rank a timed-out wait was waiting for, from every rank's latest ping (Store::activity). A
// rank that hangs outside DiComm (a deadlock in its own code, an endless loop) keeps pinging, so the
// store does not fail it; its peers time out, and each used to blame the peer it waited on, which in
// a ring is often a rank that waits too. A rank that has not been waiting in DiComm for half the
// timeout or more, while this one waited all of it, is the one.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "h2/dicomm/store.hpp"

namespace h2::dicomm::detail {

// The rank to blame (-1: none) and what to add to the timeout's message ("; rank 2 is not waiting in
// DiComm: ...").
std::pair<int, std::string> missing_ranks(const std::vector<RankActivity>& ranks, int self,
                                          std::chrono::milliseconds timeout);

}  // namespace h2::dicomm::detail
