#include "pmix_bootstrap.hpp"

#include <pmix.h>

#include <mutex>

#include "h2/error.hpp"

namespace h2::dicomm::detail {

namespace {

class PmixSession {
 public:
  ~PmixSession() {
    std::lock_guard lock(mutex_);
    if (initialized_) PMIx_Finalize(nullptr, 0);
  }

  // Initialises on the first call; a failure is remembered, because PMIx_Init is not meant to be
  // retried after it failed.
  const pmix_proc_t& self() {
    std::lock_guard lock(mutex_);
    if (!initialized_ && error_.empty()) {
      pmix_status_t rc = PMIx_Init(&self_, nullptr, 0);
      if (rc == PMIX_SUCCESS) {
        initialized_ = true;
      } else {
        error_ = std::string("PMIx_Init failed: ") + PMIx_Error_string(rc) +
                 " (PMIX_RANK and PMIX_NAMESPACE are set, but no PMIx server of a launcher answers)";
      }
    }
    if (!initialized_) throw Error(H2_STATUS_INVALID_ARGUMENT, error_);
    return self_;
  }

 private:
  std::mutex mutex_;
  bool initialized_ = false;
  std::string error_;
  pmix_proc_t self_{};
};

PmixSession& session() {
  static PmixSession s;
  return s;
}

[[noreturn]] void fail(const std::string& call, pmix_status_t rc) {
  throw Error(H2_STATUS_DEVICE_ERROR, call + " failed: " + PMIx_Error_string(rc));
}

// The job-level and process-level keys come as various unsigned types depending on the server.
int as_int(const pmix_value_t& v, const char* key) {
  switch (v.type) {
    case PMIX_UINT8: return v.data.uint8;
    case PMIX_UINT16: return v.data.uint16;
    case PMIX_UINT32: return static_cast<int>(v.data.uint32);
    case PMIX_UINT64: return static_cast<int>(v.data.uint64);
    case PMIX_SIZE: return static_cast<int>(v.data.size);
    case PMIX_INT: return v.data.integer;
    case PMIX_INT32: return v.data.int32;
    case PMIX_PROC_RANK: return static_cast<int>(v.data.rank);
    default:
      throw Error(H2_STATUS_DEVICE_ERROR,
                  std::string("PMIx_Get(") + key + ") returned a value of type " + PMIx_Data_type_string(v.type));
  }
}

int get_int(const pmix_proc_t& proc, const char* key) {
  pmix_value_t* value = nullptr;
  pmix_status_t rc = PMIx_Get(&proc, key, nullptr, 0, &value);
  if (rc != PMIX_SUCCESS) fail(std::string("PMIx_Get(") + key + ")", rc);
  int result = as_int(*value, key);
  PMIX_VALUE_RELEASE(value);
  return result;
}

}  // namespace

PmixProcess pmix_process() {
  const pmix_proc_t& self = session().self();
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, self.nspace, PMIX_RANK_WILDCARD);
  PmixProcess process;
  process.rank = static_cast<int>(self.rank);
  process.world_size = get_int(job, PMIX_JOB_SIZE);
  process.local_rank = get_int(self, PMIX_LOCAL_RANK);
  process.local_world_size = get_int(job, PMIX_LOCAL_SIZE);
  return process;
}

void pmix_publish(const std::string& key, const std::string& value) {
  session().self();
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  pmix_status_t rc = PMIx_Value_load(&v, value.c_str(), PMIX_STRING);
  if (rc != PMIX_SUCCESS) fail("PMIx_Value_load", rc);
  rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
  PMIX_VALUE_DESTRUCT(&v);
  if (rc != PMIX_SUCCESS) fail("PMIx_Put(" + key + ")", rc);
  rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) fail("PMIx_Commit", rc);
}

void pmix_fence(std::chrono::milliseconds timeout) {
  const pmix_proc_t& self = session().self();
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, self.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info[2];
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  bool collect = true;
  // PMIX_TIMEOUT is in whole seconds; round up so a short timeout does not become "forever" (0).
  int seconds = static_cast<int>((timeout.count() + 999) / 1000);
  if (seconds < 1) seconds = 1;
  PMIx_Info_load(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIx_Info_load(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
  pmix_status_t rc = PMIx_Fence(&job, 1, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS) fail("PMIx_Fence", rc);
}

std::string pmix_lookup(int rank, const std::string& key) {
  const pmix_proc_t& self = session().self();
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, self.nspace, static_cast<pmix_rank_t>(rank));
  pmix_value_t* value = nullptr;
  pmix_status_t rc = PMIx_Get(&proc, key.c_str(), nullptr, 0, &value);
  if (rc != PMIX_SUCCESS) fail("PMIx_Get(" + key + ") from rank " + std::to_string(rank), rc);
  if (value->type != PMIX_STRING) {
    PMIX_VALUE_RELEASE(value);
    throw Error(H2_STATUS_DEVICE_ERROR, "PMIx_Get(" + key + ") returned something other than a string");
  }
  std::string result = value->data.string != nullptr ? value->data.string : "";
  PMIX_VALUE_RELEASE(value);
  return result;
}

}  // namespace h2::dicomm::detail
