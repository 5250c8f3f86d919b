// embedding (cnnlEmbeddingForward_v2) and its backward (cnnlEmbeddingBackward, which sums the rows of
// an index in a fixed order), index_select (cnnlIndexSelect), gather (cnnlGather_v2) and scatter_add
// (cnnlScatter_v2 in ADD mode). An index out of range fails the queue when the kernel runs.
#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

using h2::plugin::guarded;

H2_Status op_embedding(H2_Stream* handle, const H2_EmbeddingArgs* args) {
  return guarded("embedding", [&] {
    auto stream = runtime().stream(handle);
    const cnnlHandle_t cnnl_handle = handle_of(*stream);
    TensorDesc weight(args->weight), indices(args->indices), out(args->y);
    H2_CNNL(runtime().cnnl(), cnnlEmbeddingForward_v2, cnnl_handle, weight.get(), args->weight.data, indices.get(),
            args->indices.data, -1, nullptr, nullptr, out.get(), args->y.data);
  });
}

H2_Status op_embedding_backward(H2_Stream* handle, const H2_EmbeddingBackwardArgs* args) {
  return guarded("embedding_backward", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const CnnlLibrary& cnnl = runtime().cnnl();
    // CNNL sums in the gradient's dtype: a 16-bit dy with an F32 dweight is widened first.
    std::unique_ptr<h2::plugin::DeviceMath::Scratch> wide;
    const H2_Tensor dy = math.as_dtype(args->dy, args->dweight.dtype, wide);
    TensorDesc indices(args->indices), grad(dy), out(args->dweight);
    size_t bytes = 0;
    H2_CNNL(cnnl, cnnlGetEmbeddingBackwardWorkspaceSize, handle_of(*stream), grad.get(), out.get(), false, &bytes);
    StreamScratch workspace(*stream, bytes);
    H2_CNNL(cnnl, cnnlEmbeddingBackward, handle_of(*stream), -1, false, indices.get(), args->indices.data, grad.get(),
            dy.data, workspace.data(), bytes, out.get(), args->dweight.data);
  });
}

H2_Status op_index_select(H2_Stream* handle, const H2_IndexSelectArgs* args) {
  return guarded("index_select", [&] {
    auto stream = runtime().stream(handle);
    TensorDesc input(args->x), index(args->indices), out(args->y);
    H2_CNNL(runtime().cnnl(), cnnlIndexSelect, handle_of(*stream), args->dim, input.get(), args->x.data, index.get(),
            args->indices.data, out.get(), args->y.data);
  });
}

H2_Status op_gather(H2_Stream* handle, const H2_GatherArgs* args) {
  return guarded("gather", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath(*stream).gather(args->y, args->x, args->dim, args->indices);
  });
}

H2_Status op_scatter_add(H2_Stream* handle, const H2_ScatterAddArgs* args) {
  return guarded("scatter_add", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath(*stream).scatter_add(args->y, args->dim, args->indices, args->src);
  });
}

}  // namespace h2::mlu
