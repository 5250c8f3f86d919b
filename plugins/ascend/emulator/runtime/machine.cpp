#include "machine.hpp"

#include "emulator.hpp"

namespace ascend_emulator {
namespace {

const h2::emulator::MachineTraits& acl_traits() {
  static const h2::emulator::MachineTraits traits{
      .variables = kConfigVariables,
      .codes = acl_codes(),
      .invalid_device_code = ACL_ERROR_RT_INVALID_DEVICEID,
      .invalid_handle_code = ACL_ERROR_RT_INVALID_HANDLE,
      .memory_name = "ascend-emulator-hbm",
      // aclrtMalloc rounds sizes to 32 bytes and pads by 32; blocks are aligned to 512 bytes.
      .rounding = {.granule = 32, .padding = 32, .alignment = 512},
  };
  return traits;
}

}  // namespace

const h2::emulator::VendorCodes& acl_codes() {
  static const h2::emulator::VendorCodes codes{
      .invalid_argument = ACL_ERROR_INVALID_PARAM,
      .system_failure = ACL_ERROR_RT_DRV_INTERNAL_ERROR,
      .no_permission = ACL_ERROR_RT_NO_PERMISSION,
      .internal = ACL_ERROR_RT_INTERNAL_ERROR,
      .kernel_fault = ACL_ERROR_RT_AICORE_EXCEPTION,
      .device_lost = ACL_ERROR_RT_LOST_HEARTBEAT,
      .free_call = "aclrtFree",
  };
  return codes;
}

Stream::Stream(Machine& machine, int32_t device)
    : TaskQueue(
          device, [&machine](const std::string& name) { machine.before_task(name); }, ACL_ERROR_RT_INTERNAL_ERROR) {}

Machine::Machine(Config config) : EmulatedMachine(std::move(config), acl_traits()) {}

Machine::~Machine() {
  stop_queues();
}

std::shared_ptr<h2::emulator::TaskQueue> Machine::make_queue(int32_t device) {
  return std::make_shared<Stream>(*this, device);
}

std::string Machine::export_key(void* ptr, size_t bytes, uint64_t flags) {
  const std::string key = export_range(ptr, bytes, std::to_string(flags));
  if (key.size() >= ACL_RT_IPC_MEM_KEY_LENGTH) {
    close_export(key);
    throw Error(ACL_ERROR_INTERNAL_ERROR, "an IPC key grew too long");
  }
  return key;
}

void* Machine::import_key(const std::string& key) {
  // The tag is the exporter's flags: pid validation needs aclrtIpcMemSetImportPid, not emulated.
  const auto colon = key.rfind(':');
  if (colon != std::string::npos &&
      key.substr(colon + 1) != std::to_string(ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION))
    throw Error(ACL_ERROR_RT_NO_PERMISSION,
                "the key was exported with pid validation and aclrtIpcMemSetImportPid is not emulated; export with "
                "ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION");
  return EmulatedMachine::import_key(key).device_pointer;
}

void Machine::close_key(const std::string& key) {
  if (!close_import(key) && !close_export(key))
    throw Error(ACL_ERROR_INVALID_PARAM, "'" + key + "' is not an open IPC key of this process");
}

ReportQueue& Machine::report_queue(uint64_t thread_id) {
  std::lock_guard lock(reports_mutex_);
  auto& slot = reports_[thread_id];
  if (!slot) slot = std::make_unique<ReportQueue>();
  return *slot;
}

std::unique_ptr<Machine>& machine_slot() {
  // Never destroyed: a process may exit (std::exit) while streams and callback threads still run,
  // and they must not find the machine freed under them by static destruction.
  static auto* slot = new std::unique_ptr<Machine>();
  return *slot;
}

Machine& machine() {
  auto& slot = machine_slot();
  if (!slot) throw Error(ACL_ERROR_UNINITIALIZE, "AscendCL is not initialized (call aclInit first)");
  return *slot;
}

}  // namespace ascend_emulator
