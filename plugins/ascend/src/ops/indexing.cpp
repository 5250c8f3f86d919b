// index_select, gather, scatter_add, embedding and embedding_backward: one aclnn operator each. An
// index out of range fails the kernel, which the stream reports.
#include "aclnn_call.hpp"
#include "op_table.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

H2_Status op_index_select(H2_Stream* handle, const H2_IndexSelectArgs* args) {
  return guarded("index_select", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), indices(args->indices), y(args->y);
    run_aclnn(
        *stream, "aclnnIndexSelect",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnIndexSelectWorkspace(x.get(), args->dim, indices.get(), y.get(), size, executor);
        },
        nn.aclnnIndexSelect);
  });
}

H2_Status op_gather(H2_Stream* handle, const H2_GatherArgs* args) {
  return guarded("gather", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), indices(args->indices), y(args->y);
    run_aclnn(
        *stream, "aclnnGather",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnGatherWorkspace(x.get(), args->dim, indices.get(), y.get(), size, executor);
        },
        nn.aclnnGather);
  });
}

H2_Status op_scatter_add(H2_Stream* handle, const H2_ScatterAddArgs* args) {
  return guarded("scatter_add", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor y(args->y), indices(args->indices), src(args->src);
    run_aclnn(
        *stream, "aclnnScatterAdd",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnScatterAddWorkspace(y.get(), args->dim, indices.get(), src.get(), y.get(), size, executor);
        },
        nn.aclnnScatterAdd);
  });
}

H2_Status op_embedding(H2_Stream* handle, const H2_EmbeddingArgs* args) {
  return guarded("embedding", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor weight(args->weight), indices(args->indices), y(args->y);
    run_aclnn(
        *stream, "aclnnEmbedding",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnEmbeddingWorkspace(weight.get(), indices.get(), y.get(), size, executor);
        },
        nn.aclnnEmbedding);
  });
}

H2_Status op_embedding_backward(H2_Stream* handle, const H2_EmbeddingBackwardArgs* args) {
  return guarded("embedding_backward", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor indices(args->indices), dy(args->dy), dweight(args->dweight);
    // No padding row: a padding index outside [0, vocab) skips none.
    const auto vocab = static_cast<uint64_t>(args->dweight.shape[0]);
    run_aclnn(
        *stream, "aclnnEmbeddingDenseBackward",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnEmbeddingDenseBackwardWorkspace(dy.get(), indices.get(), vocab, vocab, false, dweight.get(),
                                                         size, executor);
        },
        nn.aclnnEmbeddingDenseBackward);
  });
}

}  // namespace h2::ascend
