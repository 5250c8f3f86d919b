/*
 * H2 device plugin C ABI.
 *
 * This header is the whole contract between H2's core (libh2core) and a vendor plugin. A plugin is a
 * shared library that exports exactly one symbol, `h2_plugin_get_api`, and implements the calls of the
 * table it returns. The core loads plugins at run time (RTLD_LOCAL), so a plugin must build with
 * hidden visibility and link its vendor runtime privately.
 *
 * The header is pure C (C11 and C++ compatible) and uses only its own types and fixed-width integers.
 *
 * ---- Reading order ----
 *   1. Versioning and struct sizes    5. Memory              9. Collectives (ABI 1.5)
 *   2. Status codes and errors        6. Streams and copies  10. The table and the entry point
 *   3. Lifecycle, logging, options    7. Events
 *   4. Devices                        8. Operators (ABI 1.1)
 *
 * ---- History ----
 *   1.0  devices, memory, streams, copies, events
 *   1.1  the operator table (section 8)
 *   1.2  stream_create_with_flags and H2_StreamFlags (an inline stream for host-computing devices)
 *   1.3  mem_export, mem_import, mem_close and H2_MemHandle (device memory shared between processes)
 *   1.4  mem_alloc_async and mem_free_async (memory ordered by a stream, as cudaMallocAsync);
 *        plugin options in H2_InitArgs (options, option_count: H2_Option) and option_list (H2_OptionInfo)
 *   1.5  collective_table (section 9): the vendor's collective library on the plugin's own devices
 *   1.6  room for every vendor library's unique id: H2_CommUniqueId grows from 128 to 4,352 bytes
 *        (HCCL's HcclRootInfo is 4,108, CNCL's cnclCliqueId 136), and H2_CollectiveTable's
 *        reserved0 becomes unique_id_bytes, how many of them the library's ids use
 *   1.7  mem_export_dmabuf: a range of device memory as a dma-buf file descriptor, which a NIC
 *        registers itself (libfabric's FI_MR_DMABUF, ibv_reg_dmabuf_mr) instead of staging it
 *
 * ---- Conventions that hold for every call ----
 * - Every call returns an H2_Status. H2_STATUS_OK is success. On any other status the plugin sets the
 *   calling thread's last-error message, which the core reads at once through `last_error`.
 * - A NULL slot in the table means "this plugin does not support the call". The core reports that as
 *   unsupported itself, which is distinct from a supported call that failed. Slots marked
 *   [optional] may be NULL; a plugin with any other slot NULL is rejected when it loads.
 * - Device pointers (returned by `mem_alloc`) are opaque to host code: a plugin may hand out addresses
 *   that the host cannot dereference. Only the plugin's own calls read or write through them.
 * - "Blocks" means the call may wait for device work to complete. Calls documented as non-blocking
 *   return after enqueuing work and must not wait for earlier work on the stream. The one exception
 *   is a stream the caller created with H2_STREAM_HOST_INLINE (ABI 1.2), on which they may run it.
 * - Enum-typed values inside structs are stored as uint32_t, so their size never depends on the compiler.
 * - Calls are thread-safe: the core may call any slot from any thread concurrently, except
 *   `initialize` and `shutdown`, which the core calls once each, with no other call in flight.
 * - Stream ordering follows CUDA: work enqueued on a stream runs after all work enqueued earlier on
 *   that same stream. Streams are otherwise unordered unless joined with events.
 */
#ifndef H2_PLUGIN_ABI_H
#define H2_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "plugin_ops.h" /* H2_OPS: the operators, listed once */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------
 * 1. Versioning and struct sizes
 *
 * The ABI has a major and a minor version.
 * - A new minor only appends: new fields at the end of structs, new slots at the end of the table,
 *   new enum values. Nothing is removed, reordered or retyped.
 * - Anything else (a reorder, a type change, a changed meaning) bumps the major.
 *
 * Compatibility rule (the core enforces it when it loads a plugin):
 * - The plugin's major must equal the core's major.
 * - The plugin's minor may be older than or equal to the core's minor, never newer.
 * - The core reads only the part of the plugin's table that the plugin's `struct_size` covers;
 *   every slot beyond it is treated as NULL (unsupported). The table must cover at least every
 *   slot of the minor it declares (H2_PLUGIN_API_SIZE_1_0 for minor 0, and so on).
 *
 * Every struct begins with `size_t struct_size`. For structs the core passes in (init args,
 * properties to fill), the core sets `struct_size` to the size it knows; a plugin built against an
 * older minor reads and writes only the fields it knows, which always fit, because the core's
 * minor is never older. H2_STRUCT_SIZE gives the size of a struct up to and including a field, so
 * each minor's size stays fixed forever even after later minors append.
 *
 * Arrays of such structs (H2_Option, H2_OptionInfo): every element has the same struct_size, set by
 * whoever wrote the array, and element i starts i * struct_size bytes after the first, so a reader
 * built against another minor than the writer still finds every element (sizeof would misplace
 * them once a minor appends a field). H2_ARRAY_AT steps that way; the reader checks that struct_size
 * covers the fields it reads, and ignores the bytes it does not know.
 * ---------------------------------------------------------------------------------------------- */
#define H2_ABI_MAJOR 1
#define H2_ABI_MINOR 7

#define H2_STRUCT_SIZE(type, last_field) (offsetof(type, last_field) + sizeof(((type*)0)->last_field))
#define H2_ARRAY_AT(type, array, index) \
  ((const type*)(const void*)((const char*)(array) + (size_t)(index) * (array)->struct_size))

/* ------------------------------------------------------------------------------------------------
 * 2. Status codes and errors
 * ---------------------------------------------------------------------------------------------- */
typedef enum H2_Status {
  H2_STATUS_OK = 0,
  H2_STATUS_INVALID_ARGUMENT = 1, /* a pointer, size, device index or handle is not valid */
  H2_STATUS_OUT_OF_MEMORY = 2,    /* device or host allocation cannot be satisfied */
  H2_STATUS_NOT_READY = 3,        /* query calls only: work is still pending; not a failure */
  H2_STATUS_UNSUPPORTED = 4,      /* the call exists but not for these arguments (e.g. a dtype) */
  H2_STATUS_RUNTIME_MISSING = 5,  /* initialize only: the vendor runtime library is not installed */
  H2_STATUS_NO_DEVICE = 6,        /* initialize only: the runtime works but finds no device */
  H2_STATUS_DEVICE_ERROR = 7,     /* the device or its driver failed; the device may be unusable */
  H2_STATUS_INTERNAL = 8          /* a bug or broken invariant inside the plugin */
} H2_Status;

/* ------------------------------------------------------------------------------------------------
 * 3. Lifecycle, logging and plugin options
 * ---------------------------------------------------------------------------------------------- */
typedef enum H2_LogLevel { H2_LOG_ERROR = 0, H2_LOG_WARNING = 1, H2_LOG_INFO = 2, H2_LOG_DEBUG = 3 } H2_LogLevel;

/* The core's logger. `message` is a NUL-terminated line without a trailing newline; it is borrowed
 * for the duration of the call only. May be called from any thread at any time between the start
 * of `initialize` and the return of `shutdown`. Thread-safe; does not block on device work. */
typedef void (*H2_LogFn)(void* user_data, H2_LogLevel level, const char* message);

/* Plugin options (ABI 1.4): settings a user or a tool passes to one plugin when it is initialized,
 * as PJRT's create_options are, so that no caller has to set a plugin's private environment
 * variables for it. A key names one setting; keys are lowercase words joined by '_' (e.g. "memory").
 * Values are strings, whatever the setting's type: the plugin parses them, so it alone decides what
 * a value means ("2GiB", "1,2", "on"). A plugin documents its keys through option_list.
 * Both strings are NUL-terminated, non-empty for `key`, and owned by the core. */
typedef struct H2_Option {
  size_t struct_size; /* H2_OPTION_SIZE_1_4 or larger; the same in every element (see section 1) */
  const char* key;
  const char* value;
} H2_Option;
#define H2_OPTION_SIZE_1_4 H2_STRUCT_SIZE(H2_Option, value)

/* One documented key of a plugin (option_list, ABI 1.4). All three strings are static,
 * NUL-terminated and owned by the plugin; they live as long as the library stays loaded. */
typedef struct H2_OptionInfo {
  size_t struct_size;        /* H2_OPTION_INFO_SIZE_1_4 or larger; the same in every element */
  const char* key;           /* what H2_Option.key names, e.g. "memory" */
  const char* description;   /* one line: what it sets, the values it takes, its environment variable */
  const char* default_value; /* what applies when neither the option nor its variable is set, in
                                words when it is not one value ("the machine's cores"); never NULL */
} H2_OptionInfo;
#define H2_OPTION_INFO_SIZE_1_4 H2_STRUCT_SIZE(H2_OptionInfo, default_value)

typedef struct H2_InitArgs {
  size_t struct_size; /* set by the core: H2_INIT_ARGS_SIZE_1_0 or larger */
  uint32_t core_abi_major;
  uint32_t core_abi_minor;
  H2_LogFn log;        /* never NULL */
  void* log_user_data; /* passed back to `log` unchanged; owned by the core */
  uint32_t log_level;  /* an H2_LogLevel: the most verbose the core prints; skip formatting beyond it */

  /* ---- Since ABI 1.4; read them only when struct_size >= H2_INIT_ARGS_SIZE_1_4 ----
   * The plugin options the caller chose for this plugin: `option_count` elements (H2_ARRAY_AT
   * steps through them), each key at most once; `options` is NULL when `option_count` is 0. The
   * array and its strings are borrowed for the initialize call only: a plugin copies what it keeps.
   * How a plugin treats them (see `initialize`): an unknown key, or a value it cannot parse, fails
   * initialize with H2_STATUS_INVALID_ARGUMENT. The core passes options only to plugins of minor 4
   * or later; it refuses to load an older plugin it was asked to pass options to. */
  const H2_Option* options;
  size_t option_count;
} H2_InitArgs;
#define H2_INIT_ARGS_SIZE_1_0 H2_STRUCT_SIZE(H2_InitArgs, log_level)
#define H2_INIT_ARGS_SIZE_1_4 H2_STRUCT_SIZE(H2_InitArgs, option_count)

/* ------------------------------------------------------------------------------------------------
 * 4. Devices
 * ---------------------------------------------------------------------------------------------- */

/* Element types. Bit `1 << dtype` is set in H2_DeviceProperties.supported_dtypes for each dtype the
 * device computes in; `peak_flops[dtype]` is indexed by the same value. 16-bit floats are stored as
 * their raw bits. */
typedef enum H2_DType {
  H2_DTYPE_INVALID = 0,
  H2_DTYPE_F32 = 1,
  H2_DTYPE_F16 = 2,
  H2_DTYPE_BF16 = 3,
  H2_DTYPE_F64 = 4,
  H2_DTYPE_I32 = 5,
  H2_DTYPE_I64 = 6,
  H2_DTYPE_U8 = 7,
  H2_DTYPE_BOOL = 8
} H2_DType;
#define H2_DTYPE_SLOTS 16 /* room in per-dtype arrays; dtype values stay below this */

typedef enum H2_DeviceKind {
  H2_DEVICE_KIND_UNKNOWN = 0,
  H2_DEVICE_KIND_CPU = 1,
  H2_DEVICE_KIND_GPU = 2,
  H2_DEVICE_KIND_NPU = 3 /* NPUs, MLUs and other accelerators */
} H2_DeviceKind;

/* Which memory a NIC may read and write directly (bitmask), so DiComm can skip host staging. */
typedef enum H2_NicDirectMemory {
  H2_NIC_DIRECT_HOST = 1u << 0,  /* pinned host memory from host_alloc can be registered with a NIC */
  H2_NIC_DIRECT_CUDA = 1u << 1,  /* device pointers can be registered as CUDA memory (FI_HMEM_CUDA) */
  H2_NIC_DIRECT_DMABUF = 1u << 2 /* device memory can be exported as a dma-buf (mem_export_dmabuf) */
} H2_NicDirectMemory;

typedef struct H2_DeviceProperties {
  size_t struct_size;                  /* set by the core before the call */
  char name[128];                      /* NUL-terminated model name, e.g. "cpu-reference" */
  char vendor[64];                     /* NUL-terminated vendor name */
  char bus_id[32];                     /* PCI bus id "0000:17:00.0", or "" when there is none */
  uint32_t kind;                       /* an H2_DeviceKind */
  uint32_t compute_units;              /* SMs, AI cores, CPU worker threads... */
  uint64_t total_memory_bytes;         /* capacity usable through mem_alloc */
  double memory_bandwidth_bytes_per_s; /* peak device memory bandwidth; 0 = unknown */
  double peak_flops[H2_DTYPE_SLOTS];   /* peak dense FLOP/s (a multiply-add is 2) per dtype; 0 = unknown */
  uint64_t supported_dtypes;           /* bitmask of 1 << H2_DType */
  uint32_t nic_direct_memory;          /* bitmask of H2_NicDirectMemory */
  uint32_t host_accessible;            /* 1 if host code may dereference device pointers directly */
} H2_DeviceProperties;
#define H2_DEVICE_PROPERTIES_SIZE_1_0 H2_STRUCT_SIZE(H2_DeviceProperties, host_accessible)

/* ------------------------------------------------------------------------------------------------
 * 5. Memory, 6. Streams and copies, 7. Events: handle types
 * ---------------------------------------------------------------------------------------------- */
typedef struct H2_Stream H2_Stream; /* opaque; created and owned by the plugin */
typedef struct H2_Event H2_Event;   /* opaque; created and owned by the plugin */

/* A handle through which another process on the same node opens device memory (mem_export,
 * mem_import; ABI 1.3). Plain bytes, opaque to the core: it may be copied and sent to another
 * process as they are. CUDA's cudaIpcMemHandle_t (64 bytes) fits. */
#define H2_MEM_HANDLE_BYTES 128
typedef struct H2_MemHandle {
  uint8_t bytes[H2_MEM_HANDLE_BYTES];
} H2_MemHandle;

typedef enum H2_MemcpyKind {
  H2_MEMCPY_HOST_TO_DEVICE = 1,
  H2_MEMCPY_DEVICE_TO_HOST = 2,
  H2_MEMCPY_DEVICE_TO_DEVICE = 3 /* both pointers from mem_alloc of this plugin, any of its devices */
} H2_MemcpyKind;

/* Hints for stream_create_with_flags (ABI 1.2). Every flag is a hint: it never changes what a
 * stream's work computes or the order it runs in, so a plugin ignores the flags it does not know or
 * does not act on, and a later minor may add flags that older plugins ignore. */
typedef enum H2_StreamFlags {
  H2_STREAM_DEFAULT = 0,
  /* The caller waits for the stream's work soon after enqueuing it, as a communication library
   * waits for its copies and reductions, and a hand-off to another thread would cost more than the
   * work. A plugin whose device computes on host threads may then run each call's work on the
   * calling thread before the call returns. Every call that enqueues on such a stream
   * (stream_wait_event included) may then block until its work has completed, and an error of
   * that work may be returned by the call itself as well as being sticky for the stream. The
   * calling thread must therefore not hold anything the awaited work needs. */
  H2_STREAM_HOST_INLINE = 1u << 0
} H2_StreamFlags;

typedef enum H2_EventFlags {
  H2_EVENT_DEFAULT = 0,
  H2_EVENT_DISABLE_TIMING = 1u << 0 /* the event cannot be used with event_elapsed_ms */
} H2_EventFlags;

/* ------------------------------------------------------------------------------------------------
 * 8. Operators (ABI 1.1)
 *
 * The table `H2_PluginApi.op_table` points to, since ABI 1.1. Each operator has one argument struct
 * and one slot `H2_Status (*op)(H2_Stream* stream, const H2_<Op>Args* args)` that enqueues the work
 * on `stream` (CUDA's ordering) and returns without waiting for it. For every operator slot:
 * - `args` and the descriptor arrays it points to are borrowed for the call only: a plugin that
 *   defers the work copies what it needs before returning. The memory the tensors describe must stay
 *   valid until the work has completed.
 * - The core has already validated the call: shapes agree as each operator below says, every dtype
 *   is one the plugin's capability declares for that operator, all tensors lie in live allocations of
 *   the stream's device, no output overlaps an input (except where an operator allows an output to
 *   be exactly an input: "in place"), and no output has overlapping elements. A plugin need not
 *   check these again, and must not fail differently when they hold.
 * - Errors that depend on data (an index out of range) are reported asynchronously: the stream's
 *   sticky error (stream_synchronize) carries the message. A plugin never writes outside outputs.
 * - Reductions over fp16/bf16 inputs accumulate in at least fp32; results are rounded to the output
 *   dtype to nearest even. The cpu-reference plugin accumulates in fp64: it defines the right answer.
 * - Saved statistics, per-row losses, norms and flags (lse, mean, rstd, loss, grad_norm's out,
 *   clip_by_norm's norm, found_inf) and AdamW's master weights and state are F32; a plugin whose capability
 *   includes F64 also accepts F64 ones, which the full-precision gradient checks use.
 * - A NULL slot means the plugin does not provide the operator; the core reports that, naming both.
 * ---------------------------------------------------------------------------------------------- */
#define H2_MAX_RANK 8

/* A strided view of device memory. A value type with a frozen layout: it is embedded by value in
 * argument structs and arrays, so it has no struct_size, and changing it needs a major bump.
 * Optional tensors are passed with data == NULL. */
typedef struct H2_Tensor {
  void* data;                   /* device pointer to the element at index (0, ..., 0) */
  uint32_t dtype;               /* an H2_DType */
  uint32_t rank;                /* 0 (one element) to H2_MAX_RANK */
  int64_t shape[H2_MAX_RANK];   /* sizes, >= 0; entries from `rank` on are 0 */
  int64_t strides[H2_MAX_RANK]; /* in elements, >= 0; 0 repeats one element along a dimension */
} H2_Tensor;

/* Operator ids, for the capability query: H2_OP_GEMM = 1, H2_OP_SOFTMAX = 2, ... in the order of the
 * one list of operators, H2_OPS in plugin_ops.h. */
#define H2_OP_ENUM_VALUE(name, NAME, id, Args, minor) H2_OP_##NAME = id,
typedef enum H2_Op { H2_OPS(H2_OP_ENUM_VALUE) } H2_Op;
#undef H2_OP_ENUM_VALUE
#define H2_OP_COUNT_1_1 39 /* ids run from 1 to this in ABI 1.1 */
/* Ids run from 1 to H2_OP_COUNT (an int constant expression) in the minor this header declares. */
#define H2_OP_COUNT_PLUS_ONE(name, NAME, id, Args, minor) +1
#define H2_OP_COUNT (0 H2_OPS(H2_OP_COUNT_PLUS_ONE))

typedef struct H2_OpCapability {
  size_t struct_size;       /* set by the core */
  uint64_t dtypes;          /* bitmask of 1 << H2_DType: the dtypes of the operator's float tensors */
  uint32_t strided_tensors; /* 1: tensors may have any strides; 0: they must be contiguous */
  uint32_t deterministic;   /* 1: the same inputs give bit-identical outputs on every run */
} H2_OpCapability;
#define H2_OP_CAPABILITY_SIZE_1_1 H2_STRUCT_SIZE(H2_OpCapability, deterministic)

/* ---- Linear algebra ---- */

/* C = alpha * op(A) @ op(B) + beta * C + bias, where op(X) is X or, with transpose_x, X with its last
 * two dimensions swapped. Rank 2: op(A) [m, k], op(B) [k, n], C [m, n]. Rank 3 (batched): C [batch,
 * m, n] and A, B [batch or 1, ...] or [...]: a batch of 1, or an operand of rank 2, is used for
 * every batch. A and B share a dtype; C and bias have A's dtype or F32. With beta == 0, C is not read
 * (NaN in it does not propagate). bias [n] is optional and added to every row. */
typedef struct H2_GemmArgs {
  size_t struct_size;
  H2_Tensor a, b, c, bias;
  uint32_t transpose_a, transpose_b;
  double alpha, beta;
} H2_GemmArgs;

/* ---- Normalisation and activations ---- */

/* y = softmax(scale * x) over the last dimension; x and y [..., rows, cols] of one dtype. With causal,
 * element (i, j) of each [rows, cols] matrix is masked when j > i + cols - rows (query i of the last
 * `rows` positions sees keys up to its own); a row with every element masked becomes 0. In place. */
typedef struct H2_SoftmaxArgs {
  size_t struct_size;
  H2_Tensor x, y;
  double scale;
  uint32_t causal;
} H2_SoftmaxArgs;

/* dx = scale * y * (dy - sum(dy * y)) over the last dimension; y, dy, dx of one shape and dtype.
 * dx may be dy (in place). */
typedef struct H2_SoftmaxBackwardArgs {
  size_t struct_size;
  H2_Tensor y, dy, dx;
  double scale;
} H2_SoftmaxBackwardArgs;

/* Over the last dimension (n): y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps)
 * with the biased variance. mean and rstd are F32 of x's shape without the last dimension, written
 * for the backward. weight and bias [n] (x's dtype or F32) are optional (1 and 0). */
typedef struct H2_LayerNormArgs {
  size_t struct_size;
  H2_Tensor x, weight, bias, y, mean, rstd;
  double eps;
} H2_LayerNormArgs;

/* From the forward's mean and rstd: dx; and when given, dweight = sum over rows of dy * xhat and
 * dbias = sum over rows of dy (overwritten, not accumulated). */
typedef struct H2_LayerNormBackwardArgs {
  size_t struct_size;
  H2_Tensor x, weight, mean, rstd, dy, dx, dweight, dbias;
} H2_LayerNormBackwardArgs;

/* y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps) over the last dimension; rstd F32 as in
 * layer norm; weight optional. */
typedef struct H2_RmsNormArgs {
  size_t struct_size;
  H2_Tensor x, weight, y, rstd;
  double eps;
} H2_RmsNormArgs;

typedef struct H2_RmsNormBackwardArgs {
  size_t struct_size;
  H2_Tensor x, weight, rstd, dy, dx, dweight;
} H2_RmsNormBackwardArgs;

/* y = x * Phi(x) with the normal CDF (approximate == 0), or
 * y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (approximate == 1). In place. */
typedef struct H2_GeluArgs {
  size_t struct_size;
  H2_Tensor x, y;
  uint32_t approximate;
} H2_GeluArgs;

/* dx = dy * gelu'(x); dx may be dy. */
typedef struct H2_GeluBackwardArgs {
  size_t struct_size;
  H2_Tensor x, dy, dx;
  uint32_t approximate;
} H2_GeluBackwardArgs;

/* y = x * sigmoid(x). In place. */
typedef struct H2_SiluArgs {
  size_t struct_size;
  H2_Tensor x, y;
} H2_SiluArgs;

/* dx = dy * silu'(x); dx may be dy. */
typedef struct H2_SiluBackwardArgs {
  size_t struct_size;
  H2_Tensor x, dy, dx;
} H2_SiluBackwardArgs;

/* y = silu(gate) * up; gate, up and y of one shape (gate and up may be two halves of one tensor). */
typedef struct H2_SwigluArgs {
  size_t struct_size;
  H2_Tensor gate, up, y;
} H2_SwigluArgs;

typedef struct H2_SwigluBackwardArgs {
  size_t struct_size;
  H2_Tensor gate, up, dy, dgate, dup;
} H2_SwigluBackwardArgs;

/* ---- Embeddings ---- */

/* y[p, :] = weight[indices[p], :] with weight [vocab, dim], indices I32 or I64 of any shape and y of
 * the indices' shape plus [dim]. An index outside [0, vocab) is an asynchronous error. */
typedef struct H2_EmbeddingArgs {
  size_t struct_size;
  H2_Tensor weight, indices, y;
} H2_EmbeddingArgs;

/* dweight[v, :] = the sum of dy[p, :] over the positions p with indices[p] == v (overwritten; rows
 * never indexed become 0). The capability's `deterministic` says whether the sum order is fixed. */
typedef struct H2_EmbeddingBackwardArgs {
  size_t struct_size;
  H2_Tensor indices, dy, dweight;
} H2_EmbeddingBackwardArgs;

/* Rotary position embedding of x [..., seq, heads, head_dim] (head_dim even) into y of the same shape.
 * For position p = position_offset + the index along the seq dimension and pair i < head_dim / 2, with
 * angle = p * base^(-2i / head_dim), the pair (x_a, x_b) becomes (x_a cos - x_b sin, x_a sin + x_b cos)
 * where (a, b) = (i, i + head_dim / 2), the "rotate half" layout of GPT-NeoX and LLaMA, or (2i, 2i + 1)
 * with interleaved. With inverse the rotation is by -angle, which is the backward (y = dx from
 * x = dy). In place. */
typedef struct H2_RotaryArgs {
  size_t struct_size;
  H2_Tensor x, y;
  double base;
  int64_t position_offset;
  uint32_t interleaved;
  uint32_t inverse;
} H2_RotaryArgs;

/* ---- Loss ---- */

/* For each row r of logits [n, vocab] with target t = targets[r] (I32 or I64) and s = label_smoothing:
 * lse[r] = log(sum_j exp(logits[r, j])) and loss[r] = lse[r] - (1 - s) logits[r, t] - s mean_j logits[r, j],
 * both F32 [n]. A row with t == ignore_index gets loss 0; any other t outside [0, vocab) is an
 * asynchronous error. */
typedef struct H2_CrossEntropyArgs {
  size_t struct_size;
  H2_Tensor logits, targets, loss, lse;
  int64_t ignore_index;
  double label_smoothing;
} H2_CrossEntropyArgs;

/* dlogits[r, j] = dloss[r] * (exp(logits[r, j] - lse[r]) - (1 - s) [j == t] - s / vocab), 0 on ignored
 * rows; dloss F32 [n]. */
typedef struct H2_CrossEntropyBackwardArgs {
  size_t struct_size;
  H2_Tensor logits, targets, lse, dloss, dlogits;
  int64_t ignore_index;
  double label_smoothing;
} H2_CrossEntropyBackwardArgs;

/* ---- Attention ---- */

/* o = softmax(scale * q k^T, causal mask as in softmax) v for each batch and head, with grouped-query
 * heads: q and o [batch, heads, seq_q, dim], k and v [batch, kv_heads, seq_k, dim], heads a multiple of
 * kv_heads, query head h reading kv head h / (heads / kv_heads). Any strides, so [batch, seq, heads,
 * dim] memory is passed as a permuted view. lse F32 [batch, heads, seq_q] receives the log-sum-exp of
 * the scaled, masked scores; a fully masked row gives o = 0 and lse = -inf. */
typedef struct H2_AttentionArgs {
  size_t struct_size;
  H2_Tensor q, k, v, o, lse;
  double scale;
  uint32_t causal;
} H2_AttentionArgs;

/* dq, dk, dv from dout with the forward's o and lse; dk and dv sum over the query heads sharing a kv
 * head (overwritten). */
typedef struct H2_AttentionBackwardArgs {
  size_t struct_size;
  H2_Tensor q, k, v, o, lse, dout, dq, dk, dv;
  double scale;
  uint32_t causal;
} H2_AttentionBackwardArgs;

/* ---- Random numbers ----
 * Every random operator draws from Philox-4x32-10 (Salmon et al., SC'11) keyed by (seed & 0xffffffff,
 * seed >> 32). The element of row-major logical index e uses output word e % 4 of the block at
 * counter (c & 0xffffffff, c >> 32, 0, 0), c = offset + e / 4. A call consumes ceil(numel / 4)
 * counters, so a caller drawing again passes offset + ceil(numel / 4). A uniform number is
 * u = (word >> 8) * 2^-24, exact in F32. Dropout masks and uniform values are bit-identical on every
 * device for the same seed and offset. */

/* y = keep ? x / (1 - p) : 0 with keep = (word >> 8) >= floor(p * 2^24), p in [0, 1). mask (optional,
 * U8 or BOOL of x's shape) receives keep. The backward is this operator on dy with the same seed and
 * offset. In place. */
typedef struct H2_DropoutArgs {
  size_t struct_size;
  H2_Tensor x, y, mask;
  double p;
  uint64_t seed;
  uint64_t offset;
} H2_DropoutArgs;

/* y = fmaf(u, (float)(high - low), (float)low) in F32, then rounded to y's dtype. */
typedef struct H2_UniformArgs {
  size_t struct_size;
  H2_Tensor y;
  double low, high;
  uint64_t seed;
  uint64_t offset;
} H2_UniformArgs;

/* y = mean + std * z with Box-Muller on the word pairs (0, 1) and (2, 3) of each block: for the pair
 * (w_a, w_b), u1 = ((w_a >> 8) + 1) * 2^-24, u2 = (w_b >> 8) * 2^-24, r = sqrt(-2 ln u1), element a gets
 * r cos(2 pi u2) and element b gets r sin(2 pi u2). Computed in at least F32 (values agree with the
 * reference to the accuracy of the device's log, sqrt, sin and cos). */
typedef struct H2_NormalArgs {
  size_t struct_size;
  H2_Tensor y;
  double mean, std;
  uint64_t seed;
  uint64_t offset;
} H2_NormalArgs;

/* ---- Optimizer and gradient utilities (tensor lists of `count` descriptors) ---- */

/* One AdamW step, as torch.optim.AdamW, over `count` parameters:
 *   g = grad * grad_scale;  param *= 1 - lr * weight_decay
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   param -= lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
 * params, exp_avgs and exp_avg_sqs are F32 (master weights and state); grads F32, F16 or BF16 of the
 * same shapes. model_params (optional array; entries with NULL data are skipped) are F16 or BF16
 * copies that receive the updated parameters rounded. If found_inf (optional F32 scalar) holds a
 * non-zero value when the work runs, nothing changes (a loss-scaled step that overflowed). step >= 1. */
typedef struct H2_AdamWArgs {
  size_t struct_size;
  uint32_t count;
  const H2_Tensor* params;
  const H2_Tensor* grads;
  const H2_Tensor* exp_avgs;
  const H2_Tensor* exp_avg_sqs;
  const H2_Tensor* model_params;
  H2_Tensor found_inf;
  double lr, beta1, beta2, eps, weight_decay, grad_scale;
  int64_t step;
} H2_AdamWArgs;

/* out (F32, one element) = (sum over every element x of every tensor of |x|^norm_type)^(1 / norm_type),
 * or the largest |x| when norm_type is +infinity. NaN anywhere gives NaN. */
typedef struct H2_GradNormArgs {
  size_t struct_size;
  uint32_t count;
  const H2_Tensor* tensors;
  H2_Tensor out;
  double norm_type;
} H2_GradNormArgs;

/* Gradient clipping in place: every tensor *= min(1, max_norm / (norm + eps)), with norm an F32
 * one-element tensor on the device (grad_norm's out), so no host round trip is needed. A NaN norm
 * makes every element NaN (as torch.nn.utils.clip_grad_norm_). */
typedef struct H2_ClipByNormArgs {
  size_t struct_size;
  uint32_t count;
  const H2_Tensor* tensors;
  H2_Tensor norm;
  double max_norm;
  double eps;
} H2_ClipByNormArgs;

/* Loss scaling: every tensor *= inv_scale in place, and found_inf (F32, one element) is set to 1 if any
 * element was NaN or infinite (it is never reset here, so several calls accumulate). */
typedef struct H2_UnscaleArgs {
  size_t struct_size;
  uint32_t count;
  const H2_Tensor* tensors;
  H2_Tensor found_inf;
  double inv_scale;
} H2_UnscaleArgs;

/* ---- Elementwise ---- */

typedef enum H2_BinaryOp {
  H2_BINARY_ADD = 1,
  H2_BINARY_SUB = 2,
  H2_BINARY_MUL = 3,
  H2_BINARY_DIV = 4,
  H2_BINARY_POW = 5,
  H2_BINARY_MAXIMUM = 6, /* NaN if either is NaN */
  H2_BINARY_MINIMUM = 7
} H2_BinaryOp;

/* y = a (op) b; a, b and y have y's shape and one dtype (the core turns broadcasting into stride-0
 * views). In place (y may be a or b). */
typedef struct H2_BinaryArgs {
  size_t struct_size;
  uint32_t op; /* an H2_BinaryOp */
  H2_Tensor a, b, y;
} H2_BinaryArgs;

/* y = x (op) scalar, or scalar (op) x with scalar_first. In place. */
typedef struct H2_BinaryScalarArgs {
  size_t struct_size;
  uint32_t op; /* an H2_BinaryOp */
  H2_Tensor x, y;
  double scalar;
  uint32_t scalar_first;
} H2_BinaryScalarArgs;

typedef enum H2_UnaryOp {
  H2_UNARY_EXP = 1,
  H2_UNARY_LOG = 2,
  H2_UNARY_SQRT = 3,
  H2_UNARY_RSQRT = 4,
  H2_UNARY_NEG = 5,
  H2_UNARY_RECIPROCAL = 6
} H2_UnaryOp;

/* y = op(x), one shape and dtype. In place. */
typedef struct H2_UnaryArgs {
  size_t struct_size;
  uint32_t op; /* an H2_UnaryOp */
  H2_Tensor x, y;
} H2_UnaryArgs;

/* y = cond ? a : b; cond BOOL or U8, all of y's shape (broadcast by the core). In place (y may be a or b). */
typedef struct H2_WhereArgs {
  size_t struct_size;
  H2_Tensor cond, a, b, y;
} H2_WhereArgs;

/* y = mask ? value : x; mask BOOL or U8 of x's shape. In place. */
typedef struct H2_MaskedFillArgs {
  size_t struct_size;
  H2_Tensor x, mask, y;
  double value;
} H2_MaskedFillArgs;

/* ---- Reductions ---- */

typedef enum H2_ReduceOp {
  H2_REDUCE_SUM = 1,
  H2_REDUCE_MEAN = 2,
  H2_REDUCE_MAX = 3, /* NaN propagates; `indices` may receive the first position of the maximum */
  H2_REDUCE_AMAX = 4 /* the largest |x| (the scale statistic of low-precision training) */
} H2_ReduceOp;

/* Reduces x over the dimensions whose bits are set in dims_mask (bit d: dimension d). y has x's shape
 * with those dimensions removed, or kept with size 1 when keepdim; y's dtype is x's or F32. For MAX
 * over exactly one dimension, indices (optional, I64 of y's shape) receives the index of the first
 * maximum. The sum of no elements is 0, their mean NaN; MAX and AMAX need at least one. */
typedef struct H2_ReduceArgs {
  size_t struct_size;
  uint32_t op; /* an H2_ReduceOp */
  H2_Tensor x, y, indices;
  uint32_t dims_mask;
  uint32_t keepdim;
} H2_ReduceArgs;

/* ---- Data movement and factories ---- */

/* y = x converted to y's dtype, for any strides of either (so it also makes tensors contiguous and,
 * through views, serves transpose, cat and split). Float to float and integer to float round to
 * nearest even; float to integer truncates toward zero, saturates at the integer's range and maps NaN
 * to 0; BOOL is 0 or 1. x may repeat elements (stride 0); y may not. */
typedef struct H2_CopyArgs {
  size_t struct_size;
  H2_Tensor x, y;
} H2_CopyArgs;

/* Every element of y = value rounded to y's dtype. */
typedef struct H2_FillArgs {
  size_t struct_size;
  H2_Tensor y;
  double value;
} H2_FillArgs;

/* y[i] = start + i * step for the rank-1 y, computed in F64 and rounded to y's dtype. */
typedef struct H2_ArangeArgs {
  size_t struct_size;
  H2_Tensor y;
  double start, step;
} H2_ArangeArgs;

/* y = x with dimension `dim` replaced by the rows indices[0..n) (rank 1, I32 or I64): y's shape is x's
 * with shape[dim] = n. Indices outside [0, x.shape[dim]) are an asynchronous error. */
typedef struct H2_IndexSelectArgs {
  size_t struct_size;
  H2_Tensor x, indices, y;
  int32_t dim;
} H2_IndexSelectArgs;

/* y[p] = x[p with its coordinate along `dim` replaced by indices[p]]; indices and y of one shape, of
 * x's rank, every other dimension no larger than x's. (torch.gather) */
typedef struct H2_GatherArgs {
  size_t struct_size;
  H2_Tensor x, indices, y;
  int32_t dim;
} H2_GatherArgs;

/* y[p with its coordinate along `dim` replaced by indices[p]] += src[p] for every p of the shape that
 * indices and src share (of y's rank, every dimension but `dim` no larger than y's); y is read and
 * written (torch.scatter_add_). Backward of gather, and of index_select with an index broadcast along
 * the other dimensions. */
typedef struct H2_ScatterAddArgs {
  size_t struct_size;
  H2_Tensor y, indices, src;
  int32_t dim;
} H2_ScatterAddArgs;

/* ---- The operator table ----
 * Every slot enqueues on `stream` and is non-blocking (see the top of this section). Only
 * `capability` is required; a NULL operator slot means the plugin does not provide it. The operator
 * slots follow the order of H2_Op, and later minors append both together. */
typedef struct H2_OpTable {
  size_t struct_size; /* sizeof the table as the plugin was built */

  /* Fills `*capability` for operator `op` (an H2_Op) on `device`; the core zeroes it and sets its
   * struct_size first. Returns H2_STATUS_UNSUPPORTED for an operator the plugin lacks. Non-blocking. */
  H2_Status (*capability)(int32_t device, uint32_t op, H2_OpCapability* capability);

  /* One slot per operator, in id order (H2_OPS):
   *   H2_Status (*gemm)(H2_Stream* stream, const H2_GemmArgs* args);
   *   H2_Status (*softmax)(H2_Stream* stream, const H2_SoftmaxArgs* args);  ...  */
#define H2_OP_TABLE_SLOT(name, NAME, id, Args, minor) H2_Status (*name)(H2_Stream * stream, const Args* args);
  H2_OPS(H2_OP_TABLE_SLOT)
#undef H2_OP_TABLE_SLOT
} H2_OpTable;
#define H2_OP_TABLE_SIZE_1_1 H2_STRUCT_SIZE(H2_OpTable, scatter_add)

/* ------------------------------------------------------------------------------------------------
 * 9. Collectives (ABI 1.5): the vendor's collective library on the plugin's own devices
 *
 * The table `H2_PluginApi.collective_table` points to, since ABI 1.5; NULL when the plugin offers
 * none. A plugin offers the collective library its vendor ships for its devices (NCCL for CUDA, HCCL
 * for Ascend, CNCL for Cambricon; cpu-reference implements the same calls over shared memory between
 * the processes of one node), so that a communication library (DiComm) runs a communicator whose
 * ranks all use this plugin's devices on the vendor's links (NVLink, HCCS, the vendor's RDMA), and
 * the part inside each plugin's group of a communicator that spans plugins.
 *
 * The pattern is NCCL's: one rank asks for a unique id, the caller carries it to every other rank
 * (DiComm through its rendezvous store), and every rank creates its communicator from it with the
 * same rank count and its own rank.
 *
 * Conventions for every data call (allreduce ... recv):
 * - It enqueues on `stream`, a stream of the communicator's device, and is non-blocking, as the
 *   operators are (the one exception: a stream created with H2_STREAM_HOST_INLINE). The work sees what
 *   was enqueued on `stream` before the call; what is enqueued after it sees the result.
 * - A communicator's calls run one at a time, in the order they are issued: issue them on one stream,
 *   or order the streams they go to with events (as with NCCL).
 * - Every rank of the communicator issues the same collectives in the same order, with the same
 *   count, dtype, op and root. A rank's sends to one peer match that peer's receives from it in the
 *   order issued, with the same count and dtype.
 * - Buffers are device pointers of the communicator's device (from mem_alloc or mem_alloc_async),
 *   contiguous, of `count` elements of `dtype`. They are borrowed: they must stay allocated until
 *   the work has run on `stream`. Where a call says "in place", the receive buffer may be the send
 *   buffer; buffers that overlap otherwise are the caller's bug.
 * - `op` is an H2_ReduceOp: SUM, MEAN (the sum divided by the rank count) or MAX. `dtype` is an
 *   H2_DType; a plugin returns H2_STATUS_UNSUPPORTED, saying which, for a dtype or op its library
 *   lacks (nothing is enqueued then).
 * - Every rank ends with the same bytes for a reduction (the library reduces in one order on all).
 * - The call itself fails only for invalid arguments or an aborted communicator. A failure while the
 *   work runs (a peer gone, the library's timeout, an abort) becomes the stream's asynchronous error,
 *   which stream_synchronize, stream_query and event waits on later work report; the communicator
 *   is unusable afterwards except for comm_abort and comm_destroy.
 * ---------------------------------------------------------------------------------------------- */
typedef struct H2_Comm H2_Comm; /* opaque; created by comm_init_rank and owned by the caller */

/* What one rank hands every other rank to make one communicator: plain bytes, opaque to the caller,
 * which may copy and send them as they are. The library's id fills the first
 * H2_CollectiveTable.unique_id_bytes of them; the rest are zero. Room for NCCL's ncclUniqueId (128
 * bytes), CNCL's cnclCliqueId (136) and HCCL's HcclRootInfo (4,108).
 * ABI 1.5 had 128 bytes. The struct only ever travels by pointer, and a plugin's minor is never newer
 * than the core's, so a 1.5 plugin writes and reads the first 128 bytes of the core's larger id. */
#define H2_COMM_UNIQUE_ID_BYTES 4352
typedef struct H2_CommUniqueId {
  uint8_t bytes[H2_COMM_UNIQUE_ID_BYTES];
} H2_CommUniqueId;

/* Where the ranks of one communicator may be. */
typedef enum H2_CommScope {
  H2_COMM_SCOPE_NODE = 1,   /* on one node only (cpu-reference's shared memory) */
  H2_COMM_SCOPE_NETWORK = 2 /* on any nodes the library's network reaches (NCCL over InfiniBand) */
} H2_CommScope;

typedef struct H2_CollectiveTable {
  size_t struct_size; /* sizeof the table as the plugin was built */
  /* The library and its version, "NCCL 2.21.5". Static, NUL-terminated, never NULL. */
  const char* library_name;
  uint32_t scope; /* an H2_CommScope */
  /* How many leading bytes of an H2_CommUniqueId the library's ids use (1 to H2_COMM_UNIQUE_ID_BYTES):
   * a caller that carries an id to other ranks may send only these. 0 (a 1.5 table, where this field
   * was reserved0) means 128. Since ABI 1.6. */
  uint32_t unique_id_bytes;

  /* Writes a new unique id to `*id` (written by the plugin, owned by the caller). Called on one rank
   * per communicator. Blocks briefly (the library may open a listening socket). */
  H2_Status (*get_unique_id)(H2_CommUniqueId* id);

  /* Makes this process's member `rank` (0 <= rank < nranks) of the communicator that `id` names,
   * on device `device`, and writes it to `*comm`, owned by the caller until comm_destroy. `id` is
   * borrowed for the call only. Blocks until all `nranks` ranks have joined, or fails with
   * H2_STATUS_DEVICE_ERROR, naming the ranks missing, once `timeout_ms` have passed (0: the plugin's
   * own default, at least a minute). Returns H2_STATUS_UNSUPPORTED, saying why, when the ranks cannot
   * be joined by this library (a node-scoped library and ranks on other nodes, say). */
  H2_Status (*comm_init_rank)(int32_t device, const H2_CommUniqueId* id, int32_t nranks, int32_t rank,
                              uint32_t timeout_ms, H2_Comm** comm);

  /* Destroys `comm`. The caller has made sure, by synchronizing the streams it used, that no work
   * of `comm` is queued or running, unless it called comm_abort first. Blocks briefly. */
  H2_Status (*comm_destroy)(H2_Comm* comm);

  /* Makes queued, running and later work of `comm` fail promptly, on this rank and, where the
   * library can, on every other rank of the communicator (cpu-reference: all of them; NCCL: this
   * rank, the others then time out or are aborted by their own caller). `reason` (borrowed for the
   * call, may be NULL) goes into the failures' messages. May be called from any thread, at any time,
   * more than once, also while a call of `comm` runs. Never waits for device work. */
  H2_Status (*comm_abort)(H2_Comm* comm, const char* reason);

  /* recv = the reduction by `op` over all ranks of their `send` (count elements each). In place. */
  H2_Status (*allreduce)(H2_Comm* comm, const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                         H2_Stream* stream);

  /* `send` holds nranks blocks of `recv_count` elements; `recv` = the reduction by `op` of block
   * `rank` of every rank's `send`. In place when recv is send + rank * recv_count elements. */
  H2_Status (*reduce_scatter)(H2_Comm* comm, const void* send, void* recv, uint64_t recv_count, uint32_t dtype,
                              uint32_t op, H2_Stream* stream);

  /* `recv` holds nranks blocks of `send_count` elements: block r = rank r's `send`. In place when
   * send is recv + rank * send_count elements. */
  H2_Status (*allgather)(H2_Comm* comm, const void* send, void* recv, uint64_t send_count, uint32_t dtype,
                         H2_Stream* stream);

  /* Every rank's `recv` = rank `root`'s `send` (count elements); `send` is read on `root` only and
   * may be NULL elsewhere. In place. */
  H2_Status (*broadcast)(H2_Comm* comm, const void* send, void* recv, uint64_t count, uint32_t dtype, int32_t root,
                         H2_Stream* stream);

  /* Sends `count` elements of `buffer` to rank `peer`, which receives them with recv. Outside a
   * group the work may wait on the stream until `peer` receives. */
  H2_Status (*send)(H2_Comm* comm, const void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream);

  /* Receives into `buffer` `count` elements that rank `peer` sends with send. */
  H2_Status (*recv)(H2_Comm* comm, void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream);

  /* Calls of the calling thread between group_start and group_end (nested pairs count as one) are
   * issued together at group_end: the library runs them concurrently, so a rank may post a send to
   * and a receive from the same peer, or a send to its right and a receive from its left in a ring,
   * without waiting for each other (NCCL's ncclGroupStart / ncclGroupEnd). Every call in one group
   * must use the same stream. A data call that fails inside a group is reported at once and not
   * issued; group_end issues the rest. Non-blocking, as the data calls are. */
  H2_Status (*group_start)(void);
  H2_Status (*group_end)(void);
} H2_CollectiveTable;
/* Every slot is required in a table a plugin offers. */
#define H2_COLLECTIVE_TABLE_SIZE_1_5 H2_STRUCT_SIZE(H2_CollectiveTable, group_end)

/* ------------------------------------------------------------------------------------------------
 * 10. The table
 * ---------------------------------------------------------------------------------------------- */
typedef struct H2_PluginApi {
  /* ---- Identity: these five fields keep their offsets in every major, so a core can always
   *      read which version a plugin speaks and name it in an error. ---- */
  size_t struct_size;         /* sizeof the table as the plugin was built */
  uint32_t abi_major;         /* H2_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;         /* H2_ABI_MINOR the plugin was built against */
  const char* plugin_name;    /* static NUL-terminated string, e.g. "cpu-reference" */
  const char* plugin_version; /* static NUL-terminated string, the plugin's own release */

  /* ---- Lifecycle and errors ---- */

  /* Initializes the plugin. Called once, before any other call except `last_error` and
   * `option_list`. `args` is borrowed for the call only (its options too); the logger it names
   * stays valid until `shutdown` returns.
   * Options (ABI 1.4, H2_InitArgs.options): a key the plugin does not know fails the call with
   * H2_STATUS_INVALID_ARGUMENT and a message that names the key and lists the keys the plugin
   * knows; a value it cannot parse fails it the same way, naming the key and the value. Nothing
   * is ignored silently. A plugin that also reads environment variables for its settings takes an
   * option over the variable of the same setting: the option is the caller's explicit choice,
   * the variable the user's standing default.
   * Returns H2_STATUS_RUNTIME_MISSING when the vendor runtime library cannot be found,
   * H2_STATUS_NO_DEVICE when it is present but finds no usable device, any other error when
   * initialization failed; in all three cases the core calls nothing else except `last_error`.
   * Blocks while the vendor runtime starts. */
  H2_Status (*initialize)(const H2_InitArgs* args);

  /* Releases every resource the plugin still holds. Called once, after every stream, event and
   * allocation the core created has been destroyed or freed, and never after a failed initialize.
   * Blocks until the plugin's threads have stopped. No call is made afterwards. */
  H2_Status (*shutdown)(void);

  /* Returns the message of the last failed call made on the calling thread, or "" if none.
   * The string is owned by the plugin and stays valid until the next call on that thread.
   * Never NULL, never blocks; may be called before initialize. */
  const char* (*last_error)(void);

  /* ---- Devices ---- */

  /* Writes the number of devices (>= 1 after a successful initialize) to `*count`. Non-blocking. */
  H2_Status (*device_count)(int32_t* count);

  /* Fills `*props` for device `device` (0 <= device < count). The core zeroes `*props` and sets
   * `props->struct_size` first; the plugin writes only fields that fit in it. `props` is borrowed
   * for the call only. Non-blocking. */
  H2_Status (*device_properties)(int32_t device, H2_DeviceProperties* props);

  /* ---- Memory ---- */

  /* Allocates `bytes` (> 0) of memory on `device`, aligned to at least 256 bytes, and writes the
   * device pointer to `*ptr`. The contents are unspecified. The memory is owned by the caller until
   * passed to mem_free. Returns H2_STATUS_OUT_OF_MEMORY (with a message naming the device, the
   * request and what is free) when it does not fit. Non-blocking. */
  H2_Status (*mem_alloc)(int32_t device, size_t bytes, void** ptr);

  /* Frees `ptr` from mem_alloc (or mem_alloc_async) on `device`. Blocks until all work enqueued so
   * far that may use the memory has completed (as cudaFree does), so queued work never touches freed
   * memory. mem_free_async (ABI 1.4) frees without blocking. */
  H2_Status (*mem_free)(int32_t device, void* ptr);

  /* [optional] Writes the device's currently free and total allocatable bytes. Non-blocking. */
  H2_Status (*mem_info)(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes);

  /* [optional] Allocates `bytes` (> 0) of pinned (page-locked) host memory that host code may read and write
   * and that copies and NICs may use at full speed. Owned by the caller until host_free. */
  H2_Status (*host_alloc)(size_t bytes, void** ptr);

  /* [optional] Frees memory from host_alloc. Blocks until work enqueued so far on every stream completed. */
  H2_Status (*host_free)(void* ptr);

  /* ---- Streams ---- */

  /* Creates an in-order work queue on `device` and writes its handle to `*stream`. The handle is
   * owned by the caller until stream_destroy. Non-blocking. (stream_create_with_flags, at the end of
   * the table since ABI 1.2, takes H2_StreamFlags as well.) */
  H2_Status (*stream_create)(int32_t device, H2_Stream** stream);

  /* Destroys `stream`. Blocks until the stream's pending work has completed. The handle is
   * invalid afterwards. */
  H2_Status (*stream_destroy)(H2_Stream* stream);

  /* Blocks until all work enqueued on `stream` so far has completed. Returns the first error that
   * asynchronous work on the stream hit, if any; such an error is sticky for the stream. */
  H2_Status (*stream_synchronize)(H2_Stream* stream);

  /* Returns H2_STATUS_OK if all work enqueued on `stream` has completed (including work still
   * executing: a running task is not complete), H2_STATUS_NOT_READY if not, or the stream's sticky
   * error. Non-blocking. */
  H2_Status (*stream_query)(H2_Stream* stream);

  /* Makes all work enqueued on `stream` after this call wait until the work captured by the most
   * recent event_record of `event` has completed. If `event` was never recorded this is a no-op.
   * Later records of `event` do not affect this wait. `event` may belong to another device of the
   * plugin. Non-blocking for the host. */
  H2_Status (*stream_wait_event)(H2_Stream* stream, H2_Event* event);

  /* ---- Copies (enqueued on a stream) ---- */

  /* Sets `bytes` bytes at device pointer `dst` to `value`. Non-blocking. */
  H2_Status (*memset_async)(H2_Stream* stream, void* dst, uint8_t value, size_t bytes);

  /* Copies `bytes` bytes from `src` to `dst`; `kind` says which side is host memory. The regions
   * must not overlap. Non-blocking: a host buffer (pageable or pinned) is borrowed until the copy has
   * completed, so the caller must neither free nor modify it (H2D) nor read it (D2H) before then
   * (stream_synchronize, or an event recorded after the copy has completed). */
  H2_Status (*memcpy_async)(H2_Stream* stream, void* dst, const void* src, size_t bytes, H2_MemcpyKind kind);

  /* ---- Events ---- */

  /* Creates an event on `device` with H2_EventFlags `flags`; owned by the caller until
   * event_destroy. A new event counts as complete. Non-blocking. */
  H2_Status (*event_create)(int32_t device, uint32_t flags, H2_Event** event);

  /* Destroys `event`. Waits already enqueued on streams still complete correctly. Non-blocking. */
  H2_Status (*event_destroy)(H2_Event* event);

  /* Captures in `event` all work enqueued on `stream` so far; the event completes when that work has.
   * Re-recording replaces what the event captures. Non-blocking. */
  H2_Status (*event_record)(H2_Event* event, H2_Stream* stream);

  /* Returns H2_STATUS_OK if the captured work has completed, H2_STATUS_NOT_READY if not.
   * Non-blocking. */
  H2_Status (*event_query)(H2_Event* event);

  /* Blocks until the captured work has completed. */
  H2_Status (*event_synchronize)(H2_Event* event);

  /* [optional] Writes the time in milliseconds between the completion of `start` and of `end`. Both must have
   * been recorded, have completed (else H2_STATUS_NOT_READY) and have timing enabled. Non-blocking. */
  H2_Status (*event_elapsed_ms)(H2_Event* start, H2_Event* end, float* milliseconds);

  /* ---- Operators ---- */

  /* The operators (section 8), since ABI 1.1; NULL when the plugin provides none (and always NULL
   * for a plugin built against ABI 1.0). Static: lives as long as the library stays loaded. */
  const H2_OpTable* op_table;

  /* ---- Since ABI 1.2 ---- */

  /* [optional] Like stream_create, with H2_StreamFlags `flags` (hints; unknown bits are ignored).
   * The handle is owned by the caller until stream_destroy. Non-blocking. A core that finds this
   * slot NULL creates a plain stream with stream_create instead. */
  H2_Status (*stream_create_with_flags)(int32_t device, uint32_t flags, H2_Stream** stream);

  /* ---- Since ABI 1.3: device memory shared between processes of one node ----
   * A communication library passes a peer process a handle to its device memory once, and the peer
   * then reads (a reduction's input) or writes (an allgather's output) that memory with this
   * plugin's own copies and operators, with no copy through the kernel or the host: what CUDA IPC
   * handles give NCCL within a node. The three slots are [optional] together: all set or all NULL.
   * No ordering crosses processes: the processes agree through their own messages when memory is
   * ready to read and when it may be written again. */

  /* [optional] Writes to `*handle` a handle for a region of `device`'s memory that holds `ptr`, and
   * to `*offset` the offset of `ptr` within that region. The region is the allocation from mem_alloc
   * that holds `ptr`, or a larger one the plugin chooses (cpu-reference exports its whole arena; a
   * CUDA IPC handle names the allocation): pointers in one region may get equal handles, so an importer that keeps
   * what it opened opens each region once. `handle` and `offset` are written by the plugin and owned
   * by the caller. The handle stays valid at least as long as the allocation holding `ptr`: freeing
   * that allocation while another process still uses the bytes is the caller's bug, after which that
   * process reads undefined data (never the exporter's memory outside the region). Returns
   * H2_STATUS_INVALID_ARGUMENT when `ptr` is not inside a live allocation of `device`, and
   * H2_STATUS_UNSUPPORTED (saying why) when this device's memory cannot be shared here.
   * Non-blocking. */
  H2_Status (*mem_export)(int32_t device, const void* ptr, H2_MemHandle* handle, uint64_t* offset);

  /* [optional] Opens a handle that mem_export wrote in another process of this plugin on the same
   * node, for device `device` of this process, and writes to `*ptr` a device pointer to the start of
   * the exported region and to `*bytes` its size. `handle` is borrowed for the call only. This
   * plugin's copies and operators on streams of `device` may then read and write [*ptr, *ptr +
   * *bytes) like memory from mem_alloc, until mem_close; mem_free does not take it. Each import is
   * closed once, even when a handle is imported twice. Returns H2_STATUS_INVALID_ARGUMENT for a
   * handle that is not one of this plugin's, and H2_STATUS_UNSUPPORTED (saying why: another node,
   * another user, the process has ended) when it cannot be opened here. Blocks briefly (system
   * calls); never waits for device work. */
  H2_Status (*mem_import)(int32_t device, const H2_MemHandle* handle, void** ptr, uint64_t* bytes);

  /* [optional] Closes `ptr` from mem_import on `device`. Blocks until work enqueued so far that may
   * use it has completed, as mem_free does; the pointer is invalid afterwards. The exporting
   * process's allocation is not affected. */
  H2_Status (*mem_close)(int32_t device, void* ptr);

  /* ---- Since ABI 1.4: memory ordered by a stream ----
   * mem_free blocks the host until every queued use of the memory has completed; freeing a
   * temporary that way stalls the host (and, on CUDA, the whole device) once per temporary. These two
   * slots give memory the semantics of cudaMallocAsync and cudaFreeAsync instead: an allocation and a
   * free are operations *on a stream*, ordered with the stream's other work, so neither waits for
   * the device. The core's caching allocator uses them for the segments it carves tensors from, and
   * when caching is off (H2_ALLOCATOR=plugin) for every tensor; a plugin without them still works,
   * through mem_alloc and the blocking mem_free. The two slots are [optional] together: both set or
   * both NULL. */

  /* [optional] Allocates `bytes` (> 0) on `device` for work ordered on `stream` (a stream of
   * `device`) and writes the device pointer to `*ptr`, aligned to at least 256 bytes. The allocation
   * is an operation on `stream`: the memory may be used by work enqueued on `stream` after this call,
   * and by work on other streams, by host code and by a NIC only once they are ordered after it (an
   * event recorded on `stream` after this call has completed, or stream_synchronize); a plugin may
   * hand out memory that an earlier mem_free_async on another stream gave back, ordering `stream`
   * after that free. The contents are unspecified. The memory is owned by the caller until passed to
   * mem_free_async or mem_free, and outlives `stream`: after stream_destroy it is freed with
   * mem_free, or with mem_free_async on another stream of `device` once that stream is ordered after
   * every use. `ptr` is written by the plugin, owned by the caller. Returns H2_STATUS_OUT_OF_MEMORY,
   * with a message naming the device, the request and what is free, when it does not fit (nothing
   * is allocated then). Non-blocking: it never waits for work on any stream. */
  H2_Status (*mem_alloc_async)(int32_t device, size_t bytes, H2_Stream* stream, void** ptr);

  /* [optional] Frees `ptr` (from mem_alloc_async or mem_alloc on `device`) in the order of `stream`, a
   * stream of `device` (not necessarily the one it was allocated on): the memory stays valid for
   * work enqueued on `stream` before this call and may be reused for work ordered after it. Work on
   * *other* streams that uses the memory must be ordered before this call by the caller (record an
   * event on those streams and stream_wait_event it on `stream` first), as with cudaFreeAsync.
   * After a successful call `ptr` is no longer the caller's: enqueuing new work on it is a bug the
   * plugin may report (cpu-reference does). On failure (an unknown pointer, a stream of another
   * device) nothing is freed and the memory stays the caller's. Non-blocking. */
  H2_Status (*mem_free_async)(int32_t device, void* ptr, H2_Stream* stream);

  /* [optional] Writes to `*infos` the plugin's documented option keys (H2_OptionInfo, stepped with
   * H2_ARRAY_AT) and to `*count` how many there are: 0 when it takes no options, and `*infos` may
   * then be NULL. The array is static: owned by the plugin, it lives as long as the library stays
   * loaded. It lists every key `initialize` accepts. May be called before `initialize` (so a tool
   * can list the keys of a plugin that cannot initialize here), after it, and more than once.
   * Never blocks. A NULL slot means the plugin does not list its keys; `initialize` still decides. */
  H2_Status (*option_list)(const H2_OptionInfo** infos, size_t* count);

  /* ---- Since ABI 1.5 ---- */

  /* [optional] The vendor's collective library (section 9); NULL when the plugin offers none.
   * Static: lives as long as the library stays loaded. */
  const H2_CollectiveTable* collective_table;

  /* ---- Since ABI 1.7: device memory a NIC registers itself ----
   * An RDMA NIC reads and writes device memory where it lies once the kernel gives it the pages: a
   * dma-buf (Linux's handle for memory that one driver exports and another imports) does that for any
   * vendor, where nvidia-peermem and its kind are one vendor's. A communication library registers
   * the dma-buf with its NIC (libfabric's FI_MR_DMABUF, from libfabric 1.20; ibv_reg_dmabuf_mr) and
   * sends from device memory without a copy through host memory. (DiComm does not register dma-bufs
   * yet: built against Debian 12's libfabric 1.17, it stages such memory and `h2 devices --nics`
   * says why.) A plugin that sets this slot sets H2_NIC_DIRECT_DMABUF in
   * H2_DeviceProperties.nic_direct_memory for each device whose memory it can export. */

  /* [optional] Exports the bytes [ptr, ptr + bytes) of `device`'s memory (bytes > 0, all inside one
   * live allocation from mem_alloc or mem_alloc_async) as a dma-buf, and writes its file descriptor
   * to `*fd` and to `*offset` where `ptr` lies within the dma-buf. The dma-buf may cover more than
   * the range (drivers export whole pages: CUDA's cuMemGetHandleForAddressRange takes page-aligned
   * ranges), never memory outside the allocation's pages. The descriptor is the caller's: it closes
   * it with close(2) when done (a NIC registration made from it may outlive the close). The pages stay
   * the allocation's: freeing the allocation while a NIC still uses them is the caller's bug, as
   * for any device pointer. Returns H2_STATUS_INVALID_ARGUMENT when the range is not inside one live
   * allocation of `device`, and H2_STATUS_UNSUPPORTED (saying why: the driver, the kernel, a missing
   * /dev/udmabuf) when this device's memory cannot be exported here. `*fd` and `*offset` are written
   * only on success. Blocks briefly (system calls); never waits for device work. Thread-safe. */
  H2_Status (*mem_export_dmabuf)(int32_t device, const void* ptr, uint64_t bytes, int32_t* fd, uint64_t* offset);
} H2_PluginApi;

#define H2_PLUGIN_API_SIZE_1_0 H2_STRUCT_SIZE(H2_PluginApi, op_table)
#define H2_PLUGIN_API_SIZE_1_1 H2_PLUGIN_API_SIZE_1_0 /* 1.1 defined the op table, adding no slot here */
#define H2_PLUGIN_API_SIZE_1_2 H2_STRUCT_SIZE(H2_PluginApi, stream_create_with_flags)
#define H2_PLUGIN_API_SIZE_1_3 H2_STRUCT_SIZE(H2_PluginApi, mem_close)
#define H2_PLUGIN_API_SIZE_1_4 H2_STRUCT_SIZE(H2_PluginApi, option_list)
#define H2_PLUGIN_API_SIZE_1_5 H2_STRUCT_SIZE(H2_PluginApi, collective_table)
#define H2_PLUGIN_API_SIZE_1_6 H2_PLUGIN_API_SIZE_1_5 /* 1.6 grew the unique id, adding no slot here */
#define H2_PLUGIN_API_SIZE_1_7 H2_STRUCT_SIZE(H2_PluginApi, mem_export_dmabuf)

/* The identity prefix that is the same in every major. */
#define H2_PLUGIN_API_IDENTITY_SIZE H2_STRUCT_SIZE(H2_PluginApi, plugin_version)

/* ---- The entry point ----
 * The one symbol a plugin exports. `abi_major` is the major the core speaks. A plugin that supports
 * several majors returns the table for that major; otherwise it returns its own table and the core
 * reports the mismatch, naming both versions. The table is static: it lives as long as the library
 * stays loaded. May be called before initialize and more than once. Non-blocking. */
#define H2_PLUGIN_ENTRY_POINT "h2_plugin_get_api"
typedef const H2_PluginApi* (*H2_GetApiFn)(uint32_t abi_major);

#if defined(__GNUC__)
#define H2_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define H2_PLUGIN_EXPORT
#endif

/* Size guards: each minor's sizes are frozen forever. A failing assert means a field was inserted
 * or retyped, which needs a major bump. (x86-64 and aarch64 LP64 layouts.) */
#if defined(__cplusplus)
#define H2_STATIC_ASSERT static_assert
#else
#define H2_STATIC_ASSERT _Static_assert
#endif
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
H2_STATIC_ASSERT(H2_INIT_ARGS_SIZE_1_0 == 36, "H2_InitArgs 1.0 layout changed");
H2_STATIC_ASSERT(H2_INIT_ARGS_SIZE_1_4 == 56, "H2_InitArgs 1.4 layout changed");
H2_STATIC_ASSERT(H2_OPTION_SIZE_1_4 == 24, "H2_Option 1.4 layout changed");
H2_STATIC_ASSERT(H2_OPTION_INFO_SIZE_1_4 == 32, "H2_OptionInfo 1.4 layout changed");
H2_STATIC_ASSERT(H2_DEVICE_PROPERTIES_SIZE_1_0 == 400, "H2_DeviceProperties 1.0 layout changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_IDENTITY_SIZE == 32, "H2_PluginApi identity prefix changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_SIZE_1_0 == 224, "H2_PluginApi 1.0 layout changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_SIZE_1_2 == 232, "H2_PluginApi 1.2 layout changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_SIZE_1_3 == 256, "H2_PluginApi 1.3 layout changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_SIZE_1_4 == 280, "H2_PluginApi 1.4 layout changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_SIZE_1_5 == 288, "H2_PluginApi 1.5 layout changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_SIZE_1_7 == 296, "H2_PluginApi 1.7 layout changed");
H2_STATIC_ASSERT(H2_COLLECTIVE_TABLE_SIZE_1_5 == 120, "H2_CollectiveTable 1.5 layout changed");
H2_STATIC_ASSERT(sizeof(H2_CommUniqueId) == 4352, "H2_CommUniqueId layout changed (128 bytes in 1.5)");
H2_STATIC_ASSERT(sizeof(H2_MemHandle) == 128, "H2_MemHandle layout changed");
H2_STATIC_ASSERT(sizeof(H2_Tensor) == 144, "H2_Tensor layout changed (it is frozen: a major bump)");
H2_STATIC_ASSERT(H2_OP_CAPABILITY_SIZE_1_1 == 24, "H2_OpCapability 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_GemmArgs, beta) == 608, "H2_GemmArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_SoftmaxArgs, causal) == 308, "H2_SoftmaxArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_SoftmaxBackwardArgs, scale) == 448, "H2_SoftmaxBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_LayerNormArgs, eps) == 880, "H2_LayerNormArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_LayerNormBackwardArgs, dbias) == 1160,
                 "H2_LayerNormBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_RmsNormArgs, eps) == 592, "H2_RmsNormArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_RmsNormBackwardArgs, dweight) == 872, "H2_RmsNormBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_GeluArgs, approximate) == 300, "H2_GeluArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_GeluBackwardArgs, approximate) == 444, "H2_GeluBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_SiluArgs, y) == 296, "H2_SiluArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_SiluBackwardArgs, dx) == 440, "H2_SiluBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_SwigluArgs, y) == 440, "H2_SwigluArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_SwigluBackwardArgs, dup) == 728, "H2_SwigluBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_EmbeddingArgs, y) == 440, "H2_EmbeddingArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_EmbeddingBackwardArgs, dweight) == 440,
                 "H2_EmbeddingBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_RotaryArgs, inverse) == 320, "H2_RotaryArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_CrossEntropyArgs, label_smoothing) == 600, "H2_CrossEntropyArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_CrossEntropyBackwardArgs, label_smoothing) == 744,
                 "H2_CrossEntropyBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_AttentionArgs, causal) == 740, "H2_AttentionArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_AttentionBackwardArgs, causal) == 1316,
                 "H2_AttentionBackwardArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_DropoutArgs, offset) == 464, "H2_DropoutArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_UniformArgs, offset) == 184, "H2_UniformArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_NormalArgs, offset) == 184, "H2_NormalArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_AdamWArgs, step) == 256, "H2_AdamWArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_GradNormArgs, norm_type) == 176, "H2_GradNormArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_ClipByNormArgs, eps) == 184, "H2_ClipByNormArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_UnscaleArgs, inv_scale) == 176, "H2_UnscaleArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_BinaryArgs, y) == 448, "H2_BinaryArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_BinaryScalarArgs, scalar_first) == 316, "H2_BinaryScalarArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_UnaryArgs, y) == 304, "H2_UnaryArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_WhereArgs, y) == 584, "H2_WhereArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_MaskedFillArgs, value) == 448, "H2_MaskedFillArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_ReduceArgs, keepdim) == 456, "H2_ReduceArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_CopyArgs, y) == 296, "H2_CopyArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_FillArgs, value) == 160, "H2_FillArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_ArangeArgs, step) == 168, "H2_ArangeArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_IndexSelectArgs, dim) == 444, "H2_IndexSelectArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_GatherArgs, dim) == 444, "H2_GatherArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_ScatterAddArgs, dim) == 444, "H2_ScatterAddArgs 1.1 layout changed");
H2_STATIC_ASSERT(H2_STRUCT_SIZE(H2_OpTable, scatter_add) == 328, "H2_OpTable 1.1 layout changed");
#endif
/* Every operator's slot sits at its id's place after `capability`: the core finds a slot by id. */
#define H2_OP_SLOT_PLACE(name, NAME, id, Args, minor)                                                              \
  H2_STATIC_ASSERT(offsetof(H2_OpTable, name) == offsetof(H2_OpTable, capability) + (id) * sizeof(void (*)(void)), \
                   "H2_OpTable: slot " #name " is not at its id's place");
H2_OPS(H2_OP_SLOT_PLACE)
#undef H2_OP_SLOT_PLACE
#define H2_OP_COUNT_IN_1_1(name, NAME, id, Args, minor) +((minor) <= 1)
H2_STATIC_ASSERT(0 H2_OPS(H2_OP_COUNT_IN_1_1) == H2_OP_COUNT_1_1, "ABI 1.1 had 39 operators");
#undef H2_OP_COUNT_IN_1_1

#ifdef __cplusplus
}
#endif

#endif /* H2_PLUGIN_ABI_H */
