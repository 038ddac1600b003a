//===- CudnnGraphsTest.cpp - cuDNN's verdict on the attention graphs ------===//
//
// runtime/cuda/AttentionGraph.cpp's forward and backward graphs, as
// CudnnAttention.cpp hands them over, put to cuDNN's heuristics for an
// H200 described by its device properties, so that no GPU is needed. Each
// descriptor must finalize (a mismatched dimension, stride or operand fails
// there) and cuDNN must rank engines for both graphs of each shape GPT-2 and
// the bench run (a graph it does not recognise as fused attention gets none: a
// max reduction turned into a sum does), and a head size or sequence cuDNN
// cannot take is declined before cuDNN is asked. cuDNN's heuristics take some
// wrong graphs too (it compiles the pointwise operations as they are written):
// what the graphs compute, AttentionGraphsTest.cpp checks on the CPU, and what
// cuDNN's kernels compute, the GPU kernel test (shardc-rt-cudakernels,
// "(cudnn)").
//
// cuDNN's heuristics look for the CUDA driver; the toolkit's stub libcuda
// (CUDA's lib64/stubs, soname libcuda.so.1) stands in for it, loaded here
// first. One line per check, then "cudnn-graphs: N passed, M failed"; exit
// status 0 when all passed, 1 otherwise, 77 where cuDNN or the stub cannot
// be loaded.
//
//   shardc-rt-cudnn-graphs [STUB_LIBCUDA]
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>

using shardc::rt::cuda::AttentionShape;
using shardc::rt::cuda::CudnnAttention;

namespace {

/// The lent H200 as cudaGetDeviceProperties describes it, in the keys of
/// cuDNN's device properties (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION).
const char *const kH200 =
    R"({"maxGridSize": [2147483647, 65535, 65535],)"
    R"( "maxBlockSize": [1024, 1024, 64], "regsPerBlock": 65536,)"
    R"( "multiProcessorCount": 132, "warpSize": 32,)"
    R"( "maxSharedMemoryPerBlock": 49152,)"
    R"( "maxSharedMemoryPerBlockOptin": 232448,)"
    R"( "reservedSharedMemoryPerBlock": 1024, "maxRegistersPerSM": 65536,)"
    R"( "maxCtasPerSM": 32, "maxThreadsPerBlock": 1024,)"
    R"( "maxThreadsPerSM": 2048, "pciDeviceId": 0, "isTccDriver": 0,)"
    R"( "supportCoopLaunch": 1, "smClockRateKHz": 1980000,)"
    R"( "memClockRateKHz": 3201000, "l2CacheSize": 52428800,)"
    R"( "deviceName": "NVIDIA H200", "deviceVer": 900, "driverVer": 13000,)"
    R"( "smVersion": 90, "totalGlobalMem": 150754820096, "cudaDeviceId": 0})";

int passed = 0, failed = 0;

void report(bool ok, const std::string &name, const std::string &detail) {
  std::printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", name.c_str(),
              detail.empty() ? "" : ": ", detail.c_str());
  ++(ok ? passed : failed);
}

std::string describe(const AttentionShape &s) {
  return "b " + std::to_string(s.b) + " t " + std::to_string(s.t) + " c " +
         std::to_string(s.c) + " heads " + std::to_string(s.heads);
}

/// The shape's graphs get engines both ways (`takes`), or are declined.
void check(CudnnAttention &cudnn, const AttentionShape &shape, bool takes) {
  const std::string &why = cudnn.declines(shape);
  auto [forward, backward] = cudnn.engineCounts(shape);
  std::string counts = std::to_string(forward) + " forward, " +
                       std::to_string(backward) + " backward engines";
  if (takes)
    report(why.empty() && forward > 0 && backward > 0,
           "cuDNN takes " + describe(shape),
           why.empty() ? counts : counts + "; " + why);
  else
    report(!why.empty(), "cuDNN declines " + describe(shape),
           why.empty() ? counts : why);
}

} // namespace

int main(int argc, char **argv) {
  const char *stub = argc > 1 ? argv[1] : SHARDC_CUDA_STUB_LIBCUDA;
  if (!dlopen(stub, RTLD_NOW | RTLD_GLOBAL)) {
    std::printf("cudnn-graphs: skipped: no stub libcuda (%s)\n", dlerror());
    return 77;
  }
  CudnnAttention cudnn(CudnnAttention::DeviceProperties{kH200});
  if (cudnn.version() == 0) {
    std::printf("cudnn-graphs: skipped: %s\n",
                cudnn.declines({1, 1, 8, 1}).c_str());
    return 77;
  }
  std::printf("cudnn-graphs: cuDNN %zu, an H200 by its properties\n",
              cudnn.version());
  // GPT-2 small at the bench's batches; the bench's check model (d = 16);
  // d = 128 and T not a multiple of 64.
  check(cudnn, {16, 1024, 768, 12}, true);
  check(cudnn, {128, 1024, 768, 12}, true);
  check(cudnn, {4, 32, 64, 4}, true);
  check(cudnn, {1, 130, 256, 2}, true);
  check(cudnn, {2, 1000, 512, 8}, true);
  // Heads of 4 elements (8 bytes: no 16-byte rows), and of 264; T = 1.
  check(cudnn, {2, 9, 20, 5}, false);
  check(cudnn, {1, 64, 528, 2}, false);
  check(cudnn, {3, 1, 32, 2}, false);
  std::printf("cudnn-graphs: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
