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
RankInfo rank_info_from_environment();

}  // namespace h2::dicomm
