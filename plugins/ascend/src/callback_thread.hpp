// The host thread that runs a device's stream callbacks (aclrtLaunchCallback): AscendCL runs a
// callback only on a thread that loops on aclrtProcessReport and is subscribed to its stream, one
// such thread per device.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "acl_library.hpp"

namespace h2::ascend {

class CallbackThread {
 public:
  CallbackThread(const AclLibrary& acl, int32_t device);
  ~CallbackThread();  // stops after the callback it is running, if any
  CallbackThread(const CallbackThread&) = delete;
  CallbackThread& operator=(const CallbackThread&) = delete;

  void subscribe(aclrtStream stream);
  void unsubscribe(aclrtStream stream);

 private:
  void run();

  const AclLibrary& acl_;
  int32_t device_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace h2::ascend
