/*
 * The subset of CNCL (libcncl.so, Cambricon's collective communication library) that H2's MLU plugin
 * uses for its collective section.
 *
 * Written for H2 from Cambricon's public documentation of CNCL 1.x (the CNCL Developer Guide and the
 * API reference in cncl.h of CNCL 1.25: communicator management, collectives, point-to-point, error
 * handling, groups). Types, constants and signatures only: the plugin resolves every function by
 * name at run time (plugins/mlu/src/cncl_library.cpp); the emulator under plugins/mlu/emulator
 * implements the same signatures. Names, values and parameter orders are the documented ones;
 * nothing here is Cambricon's text.
 */
#ifndef H2_MLU_CNCL_H
#define H2_MLU_CNCL_H

#include <stddef.h>
#include <stdint.h>

#include "mlu/cnrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  CNCL_RET_SUCCESS = 0x0,
  CNCL_RET_ERR_INTERNAL = 0x01,
  CNCL_RET_ERR_UNSUPPORTED = 0x11,
  CNCL_RET_ERR_NULL_POINTER = 0x21,
  CNCL_RET_ERR_INIT = 0x51,
  CNCL_RET_ERR_NOT_INIT = 0x61,
  CNCL_RET_ERR_SYSTEM = 0x02,
  CNCL_RET_ERR_SYS_MALLOC = 0x12,
  CNCL_RET_ERR_MLU_RUNTIME = 0x03,
  CNCL_RET_ASYNC_IN_PROGRESS = 0x06,
  CNCL_RET_ASYNC_ERROR = 0x16,
  CNCL_RET_ERR_ARGUMENTS = 0x07
} cnclResult_t;

typedef enum {
  cnclInvalid = 0x0,
  cnclFloat16 = 0x10,
  cnclBfloat16 = 0x11,
  cnclFloat32 = 0x12,
  cnclInt8 = 0x20,
  cnclInt16 = 0x21,
  cnclInt32 = 0x22,
  cnclInt64 = 0x23,
  cnclUint8 = 0x30,
  cnclUint16 = 0x31,
  cnclUint32 = 0x32,
  cnclUint64 = 0x33
} cnclDataType_t;

/* No average: the plugin sums and scales. */
typedef enum { cnclSum = 0, cnclProd = 1, cnclMax = 2, cnclMin = 3 } cnclReduceOp_t;

typedef struct cnclComm* cnclComm_t;

#define CNCL_CLIQUE_ID_BYTES_SIZE 128
typedef struct cnclCliqueId {
  char data[CNCL_CLIQUE_ID_BYTES_SIZE];
  uint64_t hash;
} cnclCliqueId;

typedef cnclResult_t (*cnclGetLibVersionFn)(int* major, int* minor, int* patch);
typedef const char* (*cnclGetErrorStrFn)(cnclResult_t result);
/* A new clique id; on one rank per communicator. */
typedef cnclResult_t (*cnclGetCliqueIdFn)(cnclCliqueId* clique_id);
/* Makes this process's `num_comm` members (H2: one) of the clique, rank_list[i] on device dev_list[i];
 * blocks until every rank has joined. */
typedef cnclResult_t (*cnclInitCommsFn)(cnclComm_t* comms, int num_comm, const int* dev_list, const int* rank_list,
                                        int nrank, const cnclCliqueId* clique_id);
typedef cnclResult_t (*cnclDestroyCommsFn)(cnclComm_t* comms, int num_comm);
/* Ends the communicator's queued and running work with an error. */
typedef cnclResult_t (*cnclAbortCommFn)(cnclComm_t comm);
typedef cnclResult_t (*cnclGetCommAsyncErrorFn)(cnclComm_t comm);

/* The data calls enqueue on `queue` (of the communicator's device) and return. */
typedef cnclResult_t (*cnclAllReduceFn)(const void* send_buffer, void* recv_buffer, size_t count,
                                        cnclDataType_t data_type, cnclReduceOp_t reduce_op, cnclComm_t comm,
                                        cnrtQueue_t queue);
typedef cnclResult_t (*cnclReduceScatterFn)(const void* send_buffer, void* recv_buffer, size_t count,
                                            cnclDataType_t data_type, cnclReduceOp_t reduce_op, cnclComm_t comm,
                                            cnrtQueue_t queue);
typedef cnclResult_t (*cnclAllGatherFn)(const void* send_buffer, void* recv_buffer, size_t count,
                                        cnclDataType_t data_type, cnclComm_t comm, cnrtQueue_t queue);
typedef cnclResult_t (*cnclBroadcastFn)(const void* send_buffer, void* recv_buffer, size_t count,
                                        cnclDataType_t data_type, int root, cnclComm_t comm, cnrtQueue_t queue);
typedef cnclResult_t (*cnclSendFn)(void* buffer, size_t count, cnclDataType_t data_type, int dest, cnclComm_t comm,
                                   cnrtQueue_t queue);
typedef cnclResult_t (*cnclRecvFn)(void* buffer, size_t count, cnclDataType_t data_type, int source, cnclComm_t comm,
                                   cnrtQueue_t queue);
/* Calls between them are issued together at cnclGroupEnd (sends and receives progress together). */
typedef cnclResult_t (*cnclGroupStartFn)(void);
typedef cnclResult_t (*cnclGroupEndFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* H2_MLU_CNCL_H */
