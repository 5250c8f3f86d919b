/*
 * The subset of HCCL (libhccl.so, Huawei's collective communication library) that H2's Ascend plugin
 * uses for its collective section.
 *
 * Written for H2 from Huawei's public documentation of CANN 8.0.0 (the HCCL API reference: HcclGetRootInfo,
 * HcclCommInitRootInfo, the collective and point-to-point calls, HcclBatchSendRecv, HcclCommDestroy,
 * HcclGetCommAsyncError, HcclGetErrorString, and hccl_types.h as documented there). Types, constants
 * and signatures only: the plugin resolves every function by name at run time
 * (plugins/ascend/src/hccl_library.cpp); the emulator under plugins/ascend/emulator implements the
 * same signatures. Names, values and parameter orders are the documented ones; nothing here is
 * Huawei's text.
 */
#ifndef H2_ASCEND_HCCL_H
#define H2_ASCEND_HCCL_H

#include <stdint.h>

#include "ascend/acl_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HCCL_SUCCESS = 0,
  HCCL_E_PARA = 1,
  HCCL_E_PTR = 2,
  HCCL_E_MEMORY = 3,
  HCCL_E_INTERNAL = 4,
  HCCL_E_NOT_SUPPORT = 5,
  HCCL_E_NOT_FOUND = 6,
  HCCL_E_UNAVAIL = 7,
  HCCL_E_SYSCALL = 8,
  HCCL_E_TIMEOUT = 9,
  HCCL_E_OPEN_FILE_FAILURE = 10,
  HCCL_E_TCP_CONNECT = 11,
  HCCL_E_ROCE_CONNECT = 12,
  HCCL_E_TCP_TRANSFER = 13,
  HCCL_E_ROCE_TRANSFER = 14,
  HCCL_E_RUNTIME = 15,
  HCCL_E_DRV = 16,
  HCCL_E_PROFILING = 17,
  HCCL_E_CCE = 18,
  HCCL_E_NETWORK = 19,
  HCCL_E_AGAIN = 20,
  HCCL_E_REMOTE = 21,
  HCCL_E_RESERVED
} HcclResult;

typedef enum {
  HCCL_DATA_TYPE_INT8 = 0,
  HCCL_DATA_TYPE_INT16 = 1,
  HCCL_DATA_TYPE_INT32 = 2,
  HCCL_DATA_TYPE_FP16 = 3,
  HCCL_DATA_TYPE_FP32 = 4,
  HCCL_DATA_TYPE_INT64 = 5,
  HCCL_DATA_TYPE_UINT64 = 6,
  HCCL_DATA_TYPE_UINT8 = 7,
  HCCL_DATA_TYPE_UINT16 = 8,
  HCCL_DATA_TYPE_UINT32 = 9,
  HCCL_DATA_TYPE_FP64 = 10,
  HCCL_DATA_TYPE_BFP16 = 11,
  HCCL_DATA_TYPE_RESERVED
} HcclDataType;

/* No average: the plugin sums and scales. */
typedef enum {
  HCCL_REDUCE_SUM = 0,
  HCCL_REDUCE_PROD = 1,
  HCCL_REDUCE_MAX = 2,
  HCCL_REDUCE_MIN = 3,
  HCCL_REDUCE_RESERVED
} HcclReduceOp;

#define HCCL_ROOT_INFO_BYTES 4108
typedef struct HcclRootInfoDef {
  char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

typedef void* HcclComm;

typedef enum { HCCL_SEND = 0, HCCL_RECV = 1, HCCL_SEND_RECV_RESERVED } HcclSendRecvType;

typedef struct HcclSendRecvItemDef {
  HcclSendRecvType sendRecvType;
  void* buf;
  uint64_t count;
  HcclDataType dataType;
  uint32_t remoteRank;
} HcclSendRecvItem;

/* Writes the root's address and a unique identifier to `rootInfo`; on one rank per communicator. */
typedef HcclResult (*HcclGetRootInfoFn)(HcclRootInfo* rootInfo);
/* Joins the communicator `rootInfo` names as `rank` of `nRanks` on the calling thread's current
 * device; blocks until every rank has joined (or HCCL_CONNECT_TIMEOUT seconds, default 120). */
typedef HcclResult (*HcclCommInitRootInfoFn)(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,
                                             HcclComm* comm);
typedef HcclResult (*HcclCommDestroyFn)(HcclComm comm);
typedef HcclResult (*HcclGetCommAsyncErrorFn)(HcclComm comm, HcclResult* asyncError);
typedef const char* (*HcclGetErrorStringFn)(HcclResult code);

/* The data calls enqueue on `stream` (of the communicator's device) and return. */
typedef HcclResult (*HcclAllReduceFn)(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                                      HcclReduceOp op, HcclComm comm, aclrtStream stream);
typedef HcclResult (*HcclReduceScatterFn)(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                                          HcclReduceOp op, HcclComm comm, aclrtStream stream);
typedef HcclResult (*HcclAllGatherFn)(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType,
                                      HcclComm comm, aclrtStream stream);
/* In place: `buf` is sent on the root and received on every other rank. */
typedef HcclResult (*HcclBroadcastFn)(void* buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                      aclrtStream stream);
typedef HcclResult (*HcclSendFn)(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                                 aclrtStream stream);
typedef HcclResult (*HcclRecvFn)(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                                 aclrtStream stream);
/* The items' sends and receives progress together (a ring's send right and receive left). */
typedef HcclResult (*HcclBatchSendRecvFn)(HcclSendRecvItem* sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                          aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* H2_ASCEND_HCCL_H */
