//===- Nccl.cpp - NCCL over MPI, for cudasim ------------------------------===//
//
// The NCCL calls of runtime/cuda and of the emitted steps, one process per
// rank as on GPUs, over MPI: a communicator is an MPI communicator (the
// world's for ncclCommInitRank, which must name every rank of
// MPI_COMM_WORLD in its order; MPI_Comm_split's for ncclCommSplit). A
// collective runs on its stream (Runtime.cpp: at once, or later on a lazy
// stream), blocking: every rank issues the same collectives in the same
// order, as NCCL requires, and runs them at the same points. Inside
// ncclGroupStart/End a collective is checked at once but reaches its
// stream at ncclGroupEnd, as NCCL launches a group: work a caller puts on
// the stream between the calls (a copy into a gather's slot) runs before
// every collective of the group. f32 and bf16 reduce in f32 and round once;
// ncclAvg multiplies each contribution by 1 / ranks before the sum, as NCCL's
// floating-point average does (NCCL rounds each hop of its ring to bf16: it can
// differ from this at 3 or more ranks). Buffers must lie in live device
// allocations, the sizes NCCL assumes (recvbuff of ranks x sendcount elements
// for an all-gather, sendbuff of ranks x recvcount for a reduce-scatter) are
// checked, and so is overlap: only NCCL's in-place forms may overlap.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Simulator.h"

#include <cuda_bf16.h>
#include <mpi.h>
#include <nccl.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

struct ncclComm {
  MPI_Comm mpi;
  int rank, size;
};

namespace {

size_t elementSize(ncclDataType_t type) {
  switch (type) {
  case ncclFloat32:
  case ncclInt32:
  case ncclUint32:
    return 4;
  case ncclBfloat16:
  case ncclFloat16:
    return 2;
  case ncclFloat64:
  case ncclInt64:
  case ncclUint64:
    return 8;
  default:
    return 1;
  }
}

/// Whether a collective's communicator and stream are live.
bool usable(ncclComm_t comm, cudaStream_t stream) {
  return comm && cudasim::isLiveStream(stream);
}

/// Exits unless [send, send + sendBytes) and [recv, recv + recvBytes) are
/// disjoint or `send` is `inPlace` (NCCL's in-place form of the call), and
/// unless each fits MPI's int counts.
void checkBuffers(const char *call, const void *send, size_t sendBytes,
                  const void *recv, size_t recvBytes, const void *inPlace) {
  auto *s = static_cast<const char *>(send);
  auto *r = static_cast<const char *>(recv);
  if (send != inPlace && s < r + recvBytes && r < s + sendBytes)
    cudasim::misuse(
        std::string(call) +
        ": sendbuff and recvbuff overlap, but not in NCCL's in-place form");
  if (sendBytes > INT_MAX || recvBytes > INT_MAX)
    cudasim::misuse(std::string(call) +
                    ": over 2 GiB in one call (MPI counts)");
}

/// `n` elements of f32 or bf16 at `p`, as f32.
std::vector<float> widen(const void *p, size_t n, ncclDataType_t type) {
  std::vector<float> out(n);
  if (type == ncclFloat32)
    std::memcpy(out.data(), p, n * sizeof(float));
  else
    for (size_t i = 0; i < n; ++i)
      out[i] = __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  return out;
}

/// Stores f32 values as `type` (bf16 rounded to nearest even).
void narrow(const std::vector<float> &values, void *p, ncclDataType_t type) {
  if (type == ncclFloat32)
    std::memcpy(p, values.data(), values.size() * sizeof(float));
  else
    for (size_t i = 0; i < values.size(); ++i)
      static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(values[i]);
}

/// The reduction of a sum or an average of f32 or bf16; others are not
/// simulated (runtime/cuda uses none).
ncclResult_t reductionOf(ncclDataType_t type, ncclRedOp_t op,
                         const char *call) {
  if ((type == ncclFloat32 || type == ncclBfloat16) &&
      (op == ncclSum || op == ncclAvg))
    return ncclSuccess;
  std::fprintf(stderr,
               "cudasim: %s: reduction %d of type %d is not simulated\n", call,
               static_cast<int>(op), static_cast<int>(type));
  return ncclInvalidArgument;
}

/// The inputs to reduce, pre-multiplied for an average.
std::vector<float> contributions(const void *send, size_t n,
                                 ncclDataType_t type, ncclRedOp_t op,
                                 const ncclComm *comm) {
  std::vector<float> values = widen(send, n, type);
  if (op == ncclAvg) {
    float scale = 1.0f / static_cast<float>(comm->size);
    for (float &v : values)
      v *= scale;
  }
  return values;
}

/// The collectives of the open ncclGroupStart, and how deep it is.
struct Group {
  int depth = 0;
  std::vector<std::pair<cudaStream_t, std::function<void()>>> pending;
};
Group group;

/// A collective's work on its stream: now, or at the group's end.
void submit(cudaStream_t stream, std::function<void()> work) {
  if (group.depth > 0)
    group.pending.emplace_back(stream, std::move(work));
  else
    cudasim::enqueue(stream, std::move(work));
}

} // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  std::random_device random;
  for (char &c : uniqueId->internal)
    c = static_cast<char>(random());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId,
                              int rank) {
  int size = 0, worldRank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  if (nranks != size || rank != worldRank) {
    std::fprintf(stderr,
                 "cudasim: ncclCommInitRank: rank %d of %d, but cudasim "
                 "simulates MPI_COMM_WORLD's %d ranks (this is rank %d)\n",
                 rank, nranks, size, worldRank);
    return ncclInvalidUsage;
  }
  *comm = new ncclComm{MPI_COMM_NULL, rank, nranks};
  MPI_Comm_dup(MPI_COMM_WORLD, &(*comm)->mpi);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *) {
  if (!comm)
    return ncclInvalidArgument;
  MPI_Comm split;
  MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color,
                 key, &split);
  if (split == MPI_COMM_NULL) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  *newcomm = new ncclComm{split, 0, 0};
  MPI_Comm_rank(split, &(*newcomm)->rank);
  MPI_Comm_size(split, &(*newcomm)->size);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  default:
    return "unhandled error (cudasim)";
  }
}

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) {
    std::fprintf(stderr, "cudasim: ncclGroupEnd without ncclGroupStart\n");
    return ncclInvalidUsage;
  }
  if (--group.depth > 0)
    return ncclSuccess;
  for (auto &[stream, work] : std::exchange(group.pending, {}))
    cudasim::enqueue(stream, std::move(work));
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!usable(comm, stream))
    return ncclInvalidArgument;
  size_t bytes = sendcount * elementSize(datatype);
  cudasim::checkDeviceRange(sendbuff, bytes, "ncclAllGather: sendbuff");
  cudasim::checkDeviceRange(recvbuff, bytes * comm->size,
                            "ncclAllGather: recvbuff (ranks x sendcount)");
  checkBuffers("ncclAllGather", sendbuff, bytes, recvbuff, bytes * comm->size,
               static_cast<char *>(recvbuff) + bytes * comm->rank);
  submit(stream, [=] {
    // A copy of the input: in place, it is part of the output.
    std::vector<char> input(static_cast<const char *>(sendbuff),
                            static_cast<const char *>(sendbuff) + bytes);
    MPI_Allgather(input.data(), static_cast<int>(bytes), MPI_BYTE, recvbuff,
                  static_cast<int>(bytes), MPI_BYTE, comm->mpi);
  });
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (!usable(comm, stream))
    return ncclInvalidArgument;
  if (ncclResult_t r = reductionOf(datatype, op, "ncclReduceScatter"))
    return r;
  size_t elements = recvcount * comm->size, size = elementSize(datatype);
  cudasim::checkDeviceRange(sendbuff, elements * size,
                            "ncclReduceScatter: sendbuff (ranks x recvcount)");
  cudasim::checkDeviceRange(recvbuff, recvcount * size,
                            "ncclReduceScatter: recvbuff");
  checkBuffers("ncclReduceScatter", sendbuff, elements * size, recvbuff,
               recvcount * size,
               static_cast<char *>(recvbuff) - recvcount * size * comm->rank);
  submit(stream, [=] {
    std::vector<float> input =
        contributions(sendbuff, elements, datatype, op, comm);
    std::vector<float> output(recvcount);
    MPI_Reduce_scatter_block(input.data(), output.data(),
                             static_cast<int>(recvcount), MPI_FLOAT, MPI_SUM,
                             comm->mpi);
    narrow(output, recvbuff, datatype);
  });
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!usable(comm, stream))
    return ncclInvalidArgument;
  if (ncclResult_t r = reductionOf(datatype, op, "ncclAllReduce"))
    return r;
  size_t bytes = count * elementSize(datatype);
  cudasim::checkDeviceRange(sendbuff, bytes, "ncclAllReduce: sendbuff");
  cudasim::checkDeviceRange(recvbuff, bytes, "ncclAllReduce: recvbuff");
  checkBuffers("ncclAllReduce", sendbuff, bytes, recvbuff, bytes, recvbuff);
  submit(stream, [=] {
    std::vector<float> values =
        contributions(sendbuff, count, datatype, op, comm);
    MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(count),
                  MPI_FLOAT, MPI_SUM, comm->mpi);
    narrow(values, recvbuff, datatype);
  });
  return ncclSuccess;
}
