//===- Backend.cpp - The CUDA backend: a device, streams, NCCL ------------===//
//
// One device per rank, chosen by the rank's index on its node. Rank 0 makes
// the NCCL unique id and broadcasts it over MPI; one NCCL communicator spans
// the world and ncclCommSplit cuts one per set of mesh axes, as the MPI
// communicators are cut. The step's kernels run on one compute stream; each
// communicator has its own stream.
//
//===----------------------------------------------------------------------===//

#include "../host/Backend.h"
#include "../host/Context.h"

#include "shardc_rt/Error.h"
#include "shardc_rt/shardc_rt_cuda.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

using namespace shardc::rt;

namespace {

struct CudaBackend {
  int device = 0;
  cudaStream_t compute = nullptr;
  shardc_rt_cuda_kernels *kernels = nullptr;
  std::vector<ncclComm_t> comms;           // per set of axes
  std::vector<cudaStream_t> commStreams;   // per set of axes
  std::vector<cudaEvent_t> events;
  /// --trace: timing events, by mark; the step's first mark (its origin)
  /// and its time on the host; the start of the collective being issued
  /// and what it carries.
  std::vector<cudaEvent_t> marks;
  int32_t usedMarks = 0;
  double originMicros = 0;
  TraceMark collectiveStart = -1;
  const char *collectiveWhat = nullptr;
};

CudaBackend &backendOf(shardc_rt_context &ctx) {
  return *static_cast<CudaBackend *>(ctx.backend);
}

void check(cudaError_t error, const char *call) {
  if (error != cudaSuccess)
    SHARDC_RT_FAIL(call, cudaGetErrorString(error));
}

void check(ncclResult_t result, const char *call) {
  if (result != ncclSuccess)
    SHARDC_RT_FAIL(call, ncclGetErrorString(result));
}

#define CHECK(call) check((call), #call)

} // namespace

namespace shardc::rt {

void *backendAllocate(int64_t bytes) {
  void *ptr = nullptr;
  if (cudaMalloc(&ptr, bytes) != cudaSuccess)
    return nullptr;
  return ptr;
}

void backendRelease(void *ptr) { cudaFree(ptr); }

void backendZero(shardc_rt_context &ctx, void *ptr, int64_t bytes) {
  CHECK(cudaMemsetAsync(ptr, 0, bytes, backendOf(ctx).compute));
}

// Set-up and files: after everything the compute stream has enqueued (the
// zeroing of new state, a step's updates), which the legacy stream of a
// plain cudaMemcpy would not wait for.
void backendCopyIn(void *dst, const void *hostSrc, int64_t bytes) {
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(dst, hostSrc, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the data has landed,
  // and the (non-blocking) compute stream does not wait for the legacy one.
  CHECK(cudaDeviceSynchronize());
}

void backendCopyOut(void *hostDst, const void *src, int64_t bytes) {
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(hostDst, src, bytes, cudaMemcpyDeviceToHost));
}

void backendCopyInput(shardc_rt_context &ctx, void *dst, const void *hostSrc,
                      int64_t bytes) {
  CHECK(cudaMemcpyAsync(dst, hostSrc, bytes, cudaMemcpyHostToDevice,
                        backendOf(ctx).compute));
}

void *backendAllocateHost(int64_t bytes) {
  void *ptr = nullptr;
  if (cudaMallocHost(&ptr, bytes) != cudaSuccess)
    return nullptr;
  return ptr;
}

void backendReleaseHost(void *ptr) { cudaFreeHost(ptr); }

void backendCopyToHost(shardc_rt_context &ctx, void *hostDst, const void *src,
                       int64_t bytes) {
  CHECK(cudaMemcpyAsync(hostDst, src, bytes, cudaMemcpyDeviceToHost,
                        backendOf(ctx).compute));
}

// The compute stream alone: the step makes it wait for every collective
// whose result it reads.
void backendWaitForHost(shardc_rt_context &ctx) {
  CHECK(cudaStreamSynchronize(backendOf(ctx).compute));
}

void backendCopy(shardc_rt_context &ctx, void *dst, const void *src,
                 int64_t bytes) {
  if (bytes > 0)
    CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                          backendOf(ctx).compute));
}

void backendAdamW(shardc_rt_context &ctx,
                  const std::vector<AdamWTensor> &tensors) {
  std::vector<shardc_rt_cuda_adamw_tensor> cuda;
  cuda.reserve(tensors.size());
  for (const AdamWTensor &t : tensors)
    cuda.push_back({t.value, t.expAvg, t.expAvgSq, t.grad, t.rounded, t.count,
                    t.gradDtype == SHARDC_RT_BF16 ? 1 : 0, t.clip,
                    t.noDecay ? 1 : 0});
  const shardc_rt_model &m = *ctx.model;
  shardc_rt_cuda_adamw_multi_f32(
      backendOf(ctx).kernels, cuda.data(), static_cast<int32_t>(cuda.size()),
      static_cast<float>(learningRate(m, ctx.step)),
      static_cast<float>(m.beta1), static_cast<float>(m.beta2),
      static_cast<float>(m.eps), static_cast<float>(m.weight_decay), ctx.step);
}

void backendSumSquares(shardc_rt_context &ctx,
                       const std::vector<shardc_rt_tensor_ref> &tensors,
                       float *sum) {
  std::vector<shardc_rt_cuda_squares_tensor> cuda;
  cuda.reserve(tensors.size());
  for (const shardc_rt_tensor_ref &t : tensors)
    cuda.push_back({t.data, t.count, t.dtype == SHARDC_RT_BF16 ? 1 : 0});
  shardc_rt_cuda_sum_squares(backendOf(ctx).kernels, cuda.data(),
                             static_cast<int32_t>(cuda.size()), sum);
}

void backendClipCoefficient(shardc_rt_context &ctx,
                            const std::vector<const float *> &sums,
                            double maxNorm, float *coef, float *norm) {
  shardc_rt_cuda_clip_coefficient(backendOf(ctx).kernels, sums.data(),
                                  static_cast<int32_t>(sums.size()),
                                  static_cast<float>(maxNorm), coef, norm);
}

namespace {

/// Environment variable `name`, `fallback` where unset; any value but one of
/// `choices` is an error on every rank, on any machine.
std::string setting(const char *name, const char *fallback,
                    std::initializer_list<std::string> choices) {
  const char *value = std::getenv(name);
  std::string text = value ? value : fallback, expected;
  size_t i = 0;
  for (const std::string &choice : choices) {
    if (i > 0)
      expected += i + 1 == choices.size() ? " or " : ", ";
    expected += choice;
    ++i;
  }
  SHARDC_RT_CHECK_ALL(std::find(choices.begin(), choices.end(), text) !=
                          choices.end(),
                      name, "expected " + expected + ", got '" + text + "'");
  return text;
}

/// Why GPU `properties` cannot run the runtime's kernels, for a failed
/// image check `image`, and the fix: a build with its architecture (the
/// kernels need sm_80's bf16 mma.sync and cp.async).
std::string kernelImageAdvice(const cudaDeviceProp &properties,
                              cudaError_t image) {
  std::string arch =
      std::to_string(properties.major) + std::to_string(properties.minor);
  std::string built = SHARDC_RT_CUDA_ARCHITECTURES, fix;
  if (image != cudaErrorNoKernelImageForDevice &&
      image != cudaErrorInvalidDeviceFunction)
    fix = "a CUDA error, not the build's architectures";
  else if (properties.major < 8)
    fix = "the kernels need sm_80 or later";
  else {
    std::string list = arch + ";" + built; // CMake's list: ';'-separated
    std::replace(list.begin(), list.end(), ',', ';');
    fix = "configure shardc with -DCMAKE_CUDA_ARCHITECTURES=\"" + list +
          "\", rebuild, and build the executable again";
  }
  return std::string("GPU ") + properties.name + " (sm_" + arch +
         ") cannot run the runtime's kernels, built for CUDA architectures " +
         built + " (" + cudaGetErrorString(image) + "): " + fix;
}

} // namespace

void backendSetUp(shardc_rt_context &ctx) {
  // Attention: the fused kernels (SHARDC_ATTENTION=flash, the default) for
  // bf16, and for f32 where TF32 is on (SHARDC_TF32 below); GEMMs over the
  // full scores otherwise, or everywhere with SHARDC_ATTENTION=gemm (whose
  // results do not vary from run to run). SHARDC_ATTENTION=cudnn runs bf16
  // through cuDNN's fused attention where cuDNN takes the shape, and the
  // fused kernels elsewhere. Checked first: a bad setting is an error on
  // any machine.
  std::string attention =
      setting("SHARDC_ATTENTION", "flash", {"flash", "gemm", "cudnn"});
  // GEMM epilogues (cuBLASLt's bias, GELU, GELU-derivative and bias
  // gradient fusion): on unless SHARDC_GEMM_EPILOGUES=off, or on but for the
  // bias gradient with no-bias-grad (bench/gpu/run.sh sets either where the
  // kernel test's epilogue checks fail). Checked before the device too.
  std::string epilogues =
      setting("SHARDC_GEMM_EPILOGUES", "on", {"on", "off", "no-bias-grad"});
  // TF32 GEMMs (and, with flash attention, TF32 attention for f32) unless
  // SHARDC_TF32=0 (the GPU-against-CPU check turns them off). Checked before
  // the device too.
  bool tf32 = setting("SHARDC_TF32", "1", {"1", "0"}) == "1";
  // SHARDC_DETERMINISTIC=1: the same bits every run (attention's gradient
  // sums dq in a fixed order instead of by atomics; cuDNN attention then
  // declines). Off by default. Checked before the device too.
  bool deterministic = setting("SHARDC_DETERMINISTIC", "0", {"0", "1"}) == "1";
  // A clear message, and the same on every rank, where there is no GPU
  // (on a machine without a driver cudaGetDeviceCount returns 35).
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  std::string why =
      status != cudaSuccess
          ? std::string("cudaGetDeviceCount returned ") +
                std::to_string(static_cast<int>(status)) + " (" +
                cudaGetErrorString(status) + ")"
          : "cudaGetDeviceCount found no device";
  SHARDC_RT_CHECK_ALL(status == cudaSuccess && count > 0, "startup",
                      "no CUDA device: " + why +
                          "; build with --target host to train on the CPU");

  auto *b = new CudaBackend;
  ctx.backend = b;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ctx.worldRank,
                      MPI_INFO_NULL, &node);
  int localRank = 0, localRanks = 1;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_size(node, &localRanks);
  // Each rank of the node its own visible device (a launcher that gives
  // every rank one GPU through CUDA_VISIBLE_DEVICES makes that device 0).
  b->device = localRank % count;
  // NCCL refuses two ranks on one GPU: find it here, by the devices' UUIDs,
  // and say so on every rank.
  cudaDeviceProp properties;
  CHECK(cudaGetDeviceProperties(&properties, b->device));
  std::vector<char> uuids(static_cast<size_t>(localRanks) * 16);
  MPI_Allgather(properties.uuid.bytes, 16, MPI_CHAR, uuids.data(), 16, MPI_CHAR,
                node);
  MPI_Comm_free(&node);
  int sharer = -1;
  for (int r = 0; r < localRanks && sharer < 0; ++r)
    if (r != localRank &&
        std::memcmp(&uuids[r * 16], properties.uuid.bytes, 16) == 0)
      sharer = r;
  SHARDC_RT_CHECK_ALL(
      sharer < 0, "startup",
      "local ranks " + std::to_string(std::min(localRank, sharer)) + " and " +
          std::to_string(std::max(localRank, sharer)) + " share GPU " +
          properties.name + " (" + std::to_string(localRanks) +
          " ranks on this node, " + std::to_string(count) + " visible device" +
          (count == 1 ? "" : "s") +
          "): NCCL needs a GPU per rank; run at most one rank per GPU, or "
          "build with --target host");
  CHECK(cudaSetDevice(b->device));
  // A GPU older than the kernels' architectures (an A100 under the default
  // sm_90 build) would fail the step's first launch: said here instead, on
  // every rank, with the build that runs there.
  cudaError_t image = shardc_rt_cuda_kernels_image_status();
  SHARDC_RT_CHECK_ALL(image == cudaSuccess, "startup",
                      image == cudaSuccess
                          ? std::string()
                          : kernelImageAdvice(properties, image));
  CHECK(cudaStreamCreateWithFlags(&b->compute, cudaStreamNonBlocking));
  b->kernels = shardc_rt_cuda_kernels_create(b->compute, tf32);
  shardc_rt_cuda_kernels_set_flash_attention(b->kernels, attention != "gemm");
  shardc_rt_cuda_kernels_set_cudnn_attention(b->kernels, attention == "cudnn");
  shardc_rt_cuda_kernels_set_gemm_epilogues(b->kernels, epilogues != "off");
  shardc_rt_cuda_kernels_set_bias_grad_epilogue(b->kernels, epilogues == "on");
  shardc_rt_cuda_kernels_set_deterministic(b->kernels, deterministic);

  ncclUniqueId id;
  if (ctx.worldRank == 0)
    CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t world;
  CHECK(ncclCommInitRank(&world, ctx.worldSize, id, ctx.worldRank));
  uint32_t all = (1u << ctx.model->mesh_rank) - 1;
  b->comms.assign(all + 1, nullptr);
  b->commStreams.assign(all + 1, nullptr);
  for (uint32_t axes = 0; axes <= all; ++axes) {
    int color = static_cast<int>(ctx.groupIndex(all & ~axes));
    int key = static_cast<int>(ctx.groupIndex(axes));
    CHECK(ncclCommSplit(world, color, key, &b->comms[axes], nullptr));
    CHECK(cudaStreamCreateWithFlags(&b->commStreams[axes],
                                    cudaStreamNonBlocking));
  }
  CHECK(ncclCommDestroy(world));
  b->events.resize(ctx.model->num_events);
  for (cudaEvent_t &event : b->events)
    CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
}

void backendStartStep(shardc_rt_context &) {}

// Kernel time is not split by kind on the device (a profiler does that).
double backendGemmSeconds(shardc_rt_context &) { return 0.0; }

int64_t backendWorkspaceBytes(shardc_rt_context &ctx) {
  return shardc_rt_cuda_kernels_workspace_bytes(backendOf(ctx).kernels);
}

void backendFinishStep(shardc_rt_context &ctx) {
  CudaBackend &b = backendOf(ctx);
  // Index inputs out of range, found on the device during the step.
  const char *op = nullptr;
  int64_t bad = shardc_rt_cuda_kernels_check(b.kernels, &op);
  if (bad >= 0)
    SHARDC_RT_FAIL(
        op ? op : "kernel",
        "index at position " + std::to_string(bad) +
            " is out of range (check --data or --eval-data against the model)");
  CHECK(cudaStreamSynchronize(b.compute));
}

void backendKernelTimesEnable(shardc_rt_context &ctx, bool on) {
  shardc_rt_cuda_kernel_times_enable(backendOf(ctx).kernels, on ? 1 : 0);
}

std::vector<shardc_rt_kernel_time> backendKernelTimes(shardc_rt_context &ctx) {
  shardc_rt_cuda_kernels *k = backendOf(ctx).kernels;
  return copyAll<shardc_rt_kernel_time>(
      [&](shardc_rt_kernel_time *out, int32_t capacity) {
        return shardc_rt_cuda_kernel_times(k, out, capacity);
      });
}

namespace {

/// A mark on `stream`: the next timing event, recorded there. The step's
/// first mark is its origin: the stream is idle then (the last step was
/// waited for), so the event's time is the host's now.
TraceMark markOn(shardc_rt_context &ctx, cudaStream_t stream) {
  CudaBackend &b = backendOf(ctx);
  if (b.usedMarks == static_cast<int32_t>(b.marks.size())) {
    cudaEvent_t event;
    CHECK(cudaEventCreate(&event));
    b.marks.push_back(event);
  }
  if (b.usedMarks == 0)
    b.originMicros = ctx.trace->since(std::chrono::steady_clock::now());
  CHECK(cudaEventRecord(b.marks[b.usedMarks], stream));
  return b.usedMarks++;
}

} // namespace

TraceMark backendTraceMark(shardc_rt_context &ctx) {
  return markOn(ctx, backendOf(ctx).compute);
}

std::vector<double> backendTraceTimes(shardc_rt_context &ctx) {
  CudaBackend &b = backendOf(ctx);
  std::vector<double> times;
  for (int32_t i = 0; i < b.usedMarks; ++i) {
    float ms = 0.0f;
    CHECK(cudaEventSynchronize(b.marks[i]));
    CHECK(cudaEventElapsedTime(&ms, b.marks[0], b.marks[i]));
    times.push_back(b.originMicros + static_cast<double>(ms) * 1e3);
  }
  b.usedMarks = 0;
  return times;
}

void backendKernelCallsEnable(shardc_rt_context &ctx, bool on) {
  shardc_rt_cuda_kernel_calls_enable(backendOf(ctx).kernels, on ? 1 : 0);
}

std::vector<Trace::Call> backendKernelCalls(shardc_rt_context &ctx) {
  CudaBackend &b = backendOf(ctx);
  std::vector<shardc_rt_kernel_call> calls;
  if (b.usedMarks > 0)
    calls = copyAll<shardc_rt_kernel_call>([&](shardc_rt_kernel_call *out,
                                               int32_t capacity) {
      return shardc_rt_cuda_kernel_calls(b.kernels, b.marks[0], out, capacity);
    });
  shardc_rt_cuda_kernel_calls_reset(b.kernels);
  std::vector<Trace::Call> out;
  for (const shardc_rt_kernel_call &c : calls)
    out.push_back({c.kernel, b.originMicros + c.begin * 1e6,
                   b.originMicros + c.end * 1e6});
  return out;
}

void backendTearDown(shardc_rt_context &ctx) {
  if (!ctx.backend)
    return;
  CudaBackend &b = backendOf(ctx);
  cudaStreamSynchronize(b.compute);
  for (cudaEvent_t event : b.events)
    cudaEventDestroy(event);
  for (cudaEvent_t event : b.marks)
    cudaEventDestroy(event);
  for (size_t i = 0; i < b.comms.size(); ++i) {
    ncclCommDestroy(b.comms[i]);
    cudaStreamDestroy(b.commStreams[i]);
  }
  shardc_rt_cuda_kernels_destroy(b.kernels);
  cudaStreamDestroy(b.compute);
  delete &b;
  ctx.backend = nullptr;
}

} // namespace shardc::rt

extern "C" {

shardc_rt_cuda_kernels *shardc_rt_cuda_kernels_of(shardc_rt_context *ctx) {
  return backendOf(*ctx).kernels;
}

cudaStream_t shardc_rt_cuda_compute_stream(shardc_rt_context *ctx) {
  return backendOf(*ctx).compute;
}

ncclComm_t shardc_rt_cuda_comm(shardc_rt_context *ctx, shardc_rt_axes axes) {
  return backendOf(*ctx).comms.at(axes);
}

cudaStream_t shardc_rt_cuda_comm_stream(shardc_rt_context *ctx,
                                        shardc_rt_axes axes) {
  return backendOf(*ctx).commStreams.at(axes);
}

void shardc_rt_cuda_collective_start(shardc_rt_context *ctx,
                                     shardc_rt_axes axes, const char *what) {
  if (!ctx->trace)
    return;
  CudaBackend &b = backendOf(*ctx);
  b.collectiveStart = markOn(*ctx, b.commStreams.at(axes));
  b.collectiveWhat = what;
}

void shardc_rt_cuda_sent(shardc_rt_context *ctx, shardc_rt_collective kind,
                         shardc_rt_axes axes, shardc_rt_dtype dtype,
                         int64_t count, int32_t calls) {
  ctx->timers.bytesSent +=
      shardc::rt::bytesSent(kind, ctx->groupSize(axes), count, dtype);
  if (!ctx->trace)
    return;
  CudaBackend &b = backendOf(*ctx);
  SHARDC_RT_CHECK(b.collectiveStart >= 0, "shardc_rt_cuda_sent",
                  "no shardc_rt_cuda_collective_start before it");
  TraceMark begin = std::exchange(b.collectiveStart, -1);
  ctx->trace->collective(axes, collectiveName(kind, b.collectiveWhat), begin,
                         markOn(*ctx, b.commStreams.at(axes)),
                         collectiveArgs(*ctx, kind, axes, dtype, count, calls));
}

void *shardc_rt_cuda_copy_to_gather_slot(shardc_rt_context *ctx,
                                         shardc_rt_axes axes, void *out,
                                         const void *host_in, int64_t bytes) {
  CudaBackend &b = backendOf(*ctx);
  int member = 0;
  CHECK(ncclCommUserRank(b.comms.at(axes), &member));
  char *slot = static_cast<char *>(out) + member * bytes;
  CHECK(cudaMemcpyAsync(slot, host_in, bytes, cudaMemcpyHostToDevice,
                        b.commStreams.at(axes)));
  ctx->timers.hostCopyBytes += bytes;
  return slot;
}

cudaEvent_t shardc_rt_cuda_event(shardc_rt_context *ctx, int32_t index) {
  return backendOf(*ctx).events.at(index);
}

void shardc_rt_cuda_fail(shardc_rt_context *, const char *call,
                         const char *error, const char *file, int line) {
  shardc::rt::fatal(file, line, call, error);
}

} // extern "C"
