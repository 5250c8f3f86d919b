#include "callback_thread.hpp"

#include <chrono>

#include "acl_error.hpp"

namespace h2::ascend {
namespace {

constexpr int32_t kPollMilliseconds = 50;  // how soon a stopping thread notices

}  // namespace

CallbackThread::CallbackThread(const AclLibrary& acl, int32_t device)
    : acl_(acl), device_(device), thread_([this] { run(); }) {}

CallbackThread::~CallbackThread() {
  stopping_ = true;
  thread_.join();
}

void CallbackThread::subscribe(aclrtStream stream) {
  H2_ACL(acl_, aclrtSubscribeReport, static_cast<uint64_t>(thread_.native_handle()), stream);
}

void CallbackThread::unsubscribe(aclrtStream stream) {
  H2_ACL(acl_, aclrtUnSubscribeReport, static_cast<uint64_t>(thread_.native_handle()), stream);
}

void CallbackThread::run() {
  acl_.aclrtSetDevice(device_);
  // A timeout is the normal answer when no callback is due; after any other failure the thread waits
  // as long before trying again, so that it never spins.
  while (!stopping_) {
    const aclError code = acl_.aclrtProcessReport(kPollMilliseconds);
    if (code != ACL_SUCCESS && code != ACL_ERROR_RT_REPORT_TIMEOUT)
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMilliseconds));
  }
}

}  // namespace h2::ascend
