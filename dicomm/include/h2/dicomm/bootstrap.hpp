// Who this process is in the job: its rank, the world size and where the rendezvous store is.
// Read from the environment of whichever launcher started the process (h2 launch, torchrun, Slurm,
// mpirun/srun with PMIx), in that order of precedence.
#pragma once

#include <string>

namespace h2::dicomm {

enum class LaunchSource {
  single,    // nothing set: a job of one rank
  h2,        // H2_RANK / H2_WORLD_SIZE / H2_MASTER_ADDR / H2_MASTER_PORT (h2 launch)
  torchrun,  // RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (and LOCAL_RANK / LOCAL_WORLD_SIZE)
  slurm,     // SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, store on the first node of the job
  pmix,      // PMIx (mpirun or srun --mpi=pmix): rank 0 publishes the store's address through PMIx
};
// "h2 launch", "torchrun", "Slurm", "PMIx", "single process"
const char* launch_source_name(LaunchSource source);

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // among the ranks of this node
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";  // host of the rendezvous store (rank 0)
  int master_port = 0;                    // its port; 0: rank 0 picks one (PMIx publishes it)
  std::string token;                      // H2_JOB_TOKEN: the store admits only ranks presenting it
  LaunchSource source = LaunchSource::single;

  // "rank 2 of 4 (h2 launch, store 127.0.0.1:29500)"
  std::string describe() const;
};

// Reads the environment. Throws h2::Error naming the variable when one is set but malformed (a rank
// that is not a number, a rank outside the world size, a port out of range) or when a source is
// incomplete (RANK without WORLD_SIZE, ...).
//
// The first source present wins:
//   1. h2 launch: H2_RANK, H2_WORLD_SIZE (both or neither), H2_LOCAL_RANK, H2_LOCAL_WORLD_SIZE (both
//      or neither; absent: the job is one node, local = global), H2_MASTER_ADDR, H2_MASTER_PORT.
//   2. torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, with the
//      same rules. H2_MASTER_ADDR / H2_MASTER_PORT override MASTER_*: under torchrun the elastic
//      agent's own TCP store may already listen on MASTER_PORT.
//   3. PMIx: PMIX_RANK and PMIX_NAMESPACE set (mpirun, srun --mpi=pmix). Calls PMIx_Init (once per
//      process); rank from the process id, PMIX_JOB_SIZE, PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE.
//      master_port is 0 (rank 0 picks one and publishes it through PMIx at Store::connect);
//      master_addr is H2_MASTER_ADDR, else 127.0.0.1 when all ranks share the node, else this host's
//      name (rank 0 publishes its own).
//   4. Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and SLURM_NTASKS_PER_NODE or this node's
//      entry (SLURM_NODEID) of SLURM_TASKS_PER_NODE ("4(x2),3"). Store host: H2_MASTER_ADDR, else the
//      first host of SLURM_STEP_NODELIST or SLURM_JOB_NODELIST ("node[01-04,07]" -> "node01"; task 0
//      runs there under block and cyclic distributions). Store port: H2_MASTER_PORT, else
//      29500 + SLURM_JOB_ID % 10000 (two concurrent steps of one job need H2_MASTER_PORT).
//   5. Otherwise a single process: rank 0 of 1, store on 127.0.0.1 with an ephemeral port (both
//      overridable with H2_MASTER_ADDR / H2_MASTER_PORT).
// H2_JOB_TOKEN sets the token for every source. A variable set to the empty string counts as unset.
// With more than one rank and no PMIx, the port must be known and non-zero. Errors are h2::Error with
// H2_STATUS_INVALID_ARGUMENT ("H2_RANK='x' is not a number", "H2_RANK=4 is not below
// H2_WORLD_SIZE=4", "RANK is set but WORLD_SIZE is not"); a failed PMIx_Init is one too.
RankInfo rank_info_from_environment();

}  // namespace h2::dicomm
