// DiComm's errors: every failure of a communication call is a CommError saying what could not
// complete and why (a timeout, a failed or aborted peer, a transport error), naming the peer.
#pragma once

#include <string>

#include "h2/error.hpp"

namespace h2::dicomm {

enum class CommErrorKind {
  timeout,      // the operation did not complete within the communicator's timeout
  peer_failed,  // another rank died or aborted (the store said so); `peer` names it
  aborted,      // this rank called abort()
  transport,    // libfabric reported an error for the operation
  usage,        // the call's arguments are wrong (shapes, dtypes, ranks)
};

class CommError : public Error {
 public:
  CommError(CommErrorKind kind, int peer, const std::string& message)
      : Error(kind == CommErrorKind::usage ? H2_STATUS_INVALID_ARGUMENT : H2_STATUS_INTERNAL, message),
        kind_(kind),
        peer_(peer) {}
  CommErrorKind kind() const { return kind_; }
  int peer() const { return peer_; }  // -1 when no single peer is to blame

 private:
  CommErrorKind kind_;
  int peer_;
};

}  // namespace h2::dicomm
