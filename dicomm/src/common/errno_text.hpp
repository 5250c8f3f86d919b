// The text of an errno value, for DiComm's messages (the store's sockets, NIC discovery).
#pragma once

#include <string>

namespace h2::dicomm::detail {

// "Function not implemented": strerror_r in a form that works with both the GNU and the XSI variant
// (thread-safe, unlike strerror).
std::string errno_text(int err);

}  // namespace h2::dicomm::detail
