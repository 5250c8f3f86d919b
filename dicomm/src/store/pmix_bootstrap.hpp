// PMIx, for jobs started by mpirun or srun --mpi=pmix: who this process is, and the exchange of the
// rendezvous store's address. Internal to DiComm.
//
// PMIx is initialised once per process, on first use, and finalised when the process exits
// normally (a function-local static's destructor).
#pragma once

#include <chrono>
#include <string>

namespace h2::dicomm::detail {

struct PmixProcess {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
};

// Connects to the launcher's PMIx server (PMIx_Init) and reads this process's rank, PMIX_JOB_SIZE,
// PMIX_LOCAL_RANK and PMIX_LOCAL_SIZE. Throws h2::Error naming the failing call.
PmixProcess pmix_process();
// Makes `key`=`value` visible to the whole job after the next fence (PMIx_Put global + Commit).
void pmix_publish(const std::string& key, const std::string& value);
// Waits until every process of the job has reached the fence, collecting what they published.
void pmix_fence(std::chrono::milliseconds timeout);
// What `rank` published under `key` before the last fence.
std::string pmix_lookup(int rank, const std::string& key);

}  // namespace h2::dicomm::detail
