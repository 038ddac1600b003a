//===- Elementwise.cu - The elementwise ops -------------------------------===//
//
// add, scale, gelu, relu and their gradients, copy, fill, accumulate, iota
// and the f32 / bf16 conversions: Elementwise.cuh's kernels, a grid-stride
// loop each.
//
//===----------------------------------------------------------------------===//

#include "Elementwise.cuh"
#include "KernelUtils.cuh"

using namespace shardc::rt::cuda;

namespace {

__global__ void iotaKernel(int32_t *out, int64_t n) {
  SHARDC_GRID_STRIDE(i, n) out[i] = static_cast<int32_t>(i);
}

} // namespace

extern "C" {

cudaError_t shardc_rt_cuda_kernels_image_status(void) {
  // Every .cu of the library is compiled for the same architectures: one
  // kernel's image stands for all.
  cudaFuncAttributes attributes;
  cudaError_t status = cudaFuncGetAttributes(&attributes, iotaKernel);
  if (status != cudaSuccess)
    (void)cudaGetLastError();
  return status;
}

void shardc_rt_cuda_add_f32(shardc_rt_cuda_kernels *k, const float *lhs,
                            const float *rhs, float *y, int64_t n, int64_t m) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "add_f32");
  if (m > 0)
    add(k, lhs, rhs, y, n, m);
}

void shardc_rt_cuda_scale_f32(shardc_rt_cuda_kernels *k, const float *x,
                              float *y, int64_t n, double factor) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "scale_f32");
  launch(k, n, scaleKernel<float>, x, y, n, static_cast<float>(factor));
}

void shardc_rt_cuda_gelu_f32(shardc_rt_cuda_kernels *k, const float *x,
                             float *y, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_f32");
  launch(k, n, geluKernel<float>, x, y, n);
}

void shardc_rt_cuda_relu_f32(shardc_rt_cuda_kernels *k, const float *x,
                             float *y, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_f32");
  launch(k, n, reluKernel<float>, x, y, n);
}

void shardc_rt_cuda_iota_i32(shardc_rt_cuda_kernels *k, int32_t *out,
                             int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "iota_i32");
  launch(k, n, iotaKernel, out, n);
}

void shardc_rt_cuda_copy_f32(shardc_rt_cuda_kernels *k, float *dst,
                             const float *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "copy_f32");
  copy(k, dst, src, n);
}

void shardc_rt_cuda_fill_f32(shardc_rt_cuda_kernels *k, float *dst, float value,
                             int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "fill_f32");
  launch(k, n, fillKernel<float>, dst, value, n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_accumulate_f32(shardc_rt_cuda_kernels *k, float *dst,
                                   const float *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "accumulate_f32");
  launch(k, n, accumulateKernel<float>, dst, src, n);
}

void shardc_rt_cuda_gelu_grad_f32(shardc_rt_cuda_kernels *k, const float *dy,
                                  const float *x, float *dx, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_grad_f32");
  launch(k, n, geluGradKernel<float>, dy, x, dx, n);
}

void shardc_rt_cuda_relu_grad_f32(shardc_rt_cuda_kernels *k, const float *dy,
                                  const float *x, float *dx, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_grad_f32");
  launch(k, n, reluGradKernel<float>, dy, x, dx, n);
}

void shardc_rt_cuda_convert_f32_bf16(shardc_rt_cuda_kernels *k,
                                     shardc_rt_bf16 *dst, const float *src,
                                     int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "convert_f32_bf16");
  launch(k, n, convertKernel<float, bf16>, bf(dst), src, n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_convert_bf16_f32(shardc_rt_cuda_kernels *k, float *dst,
                                     const shardc_rt_bf16 *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "convert_bf16_f32");
  launch(k, n, convertKernel<bf16, float>, dst, bf(src), n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_add_bf16(shardc_rt_cuda_kernels *k,
                             const shardc_rt_bf16 *lhs,
                             const shardc_rt_bf16 *rhs, shardc_rt_bf16 *y,
                             int64_t n, int64_t m) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "add_bf16");
  if (m > 0)
    add(k, bf(lhs), bf(rhs), bf(y), n, m);
}

void shardc_rt_cuda_scale_bf16(shardc_rt_cuda_kernels *k,
                               const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                               int64_t n, double factor) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "scale_bf16");
  launch(k, n, scaleKernel<bf16>, bf(x), bf(y), n, static_cast<float>(factor));
}

void shardc_rt_cuda_gelu_bf16(shardc_rt_cuda_kernels *k,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                              int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_bf16");
  launch(k, n, geluKernel<bf16>, bf(x), bf(y), n);
}

void shardc_rt_cuda_relu_bf16(shardc_rt_cuda_kernels *k,
                              const shardc_rt_bf16 *x, shardc_rt_bf16 *y,
                              int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_bf16");
  launch(k, n, reluKernel<bf16>, bf(x), bf(y), n);
}

void shardc_rt_cuda_gelu_grad_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x, shardc_rt_bf16 *dx,
                                   int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "gelu_grad_bf16");
  launch(k, n, geluGradKernel<bf16>, bf(dy), bf(x), bf(dx), n);
}

void shardc_rt_cuda_relu_grad_bf16(shardc_rt_cuda_kernels *k,
                                   const shardc_rt_bf16 *dy,
                                   const shardc_rt_bf16 *x, shardc_rt_bf16 *dx,
                                   int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "relu_grad_bf16");
  launch(k, n, reluGradKernel<bf16>, bf(dy), bf(x), bf(dx), n);
}

void shardc_rt_cuda_copy_bf16(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *dst,
                              const shardc_rt_bf16 *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "copy_bf16");
  copy(k, dst, src, n);
}

void shardc_rt_cuda_fill_bf16(shardc_rt_cuda_kernels *k, shardc_rt_bf16 *dst,
                              float value, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "fill_bf16");
  launch(k, n, fillKernel<bf16>, bf(dst), value, n,
         static_cast<const ErrorSlot *>(nullptr));
}

void shardc_rt_cuda_accumulate_bf16(shardc_rt_cuda_kernels *k,
                                    shardc_rt_bf16 *dst,
                                    const shardc_rt_bf16 *src, int64_t n) {
  SHARDC_RT_CUDA_TIME_KERNEL(k, "accumulate_bf16");
  launch(k, n, accumulateKernel<bf16>, bf(dst), bf(src), n);
}

} // extern "C"
