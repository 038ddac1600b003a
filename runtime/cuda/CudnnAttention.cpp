//===- CudnnAttention.cpp - Causal attention through cuDNN's fused SDPA ---===//
//
// AttentionGraph.h's graphs as cuDNN backend descriptors: each tensor and
// operation of the data, one for one, then the operation graph, cuDNN's
// heuristics and the first execution plan that builds. cuDNN's own headers
// (cudnn_graph.h) give the types; the library is loaded at run time. Built
// where those headers are and the device is real (else
// CudnnUnavailable.cpp).
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"
#include "AttentionGraph.h"

#include <cudnn_graph.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <type_traits>
#include <vector>

namespace shardc::rt::cuda {

//===--- cuDNN, loaded --------------------------------------------------===//

/// The cuDNN entry points the graphs use, from libcudnn.so.9. The library
/// stays loaded once opened, as PyTorch and cuDNN's frontend keep it: it
/// loads its own sublibraries and keeps per-thread state that unloading
/// could leave dangling at exit.
struct CudnnAttention::Library {
  void *handle = nullptr;
  decltype(&cudnnGetVersion) getVersion = nullptr;
  decltype(&cudnnGetErrorString) errorString = nullptr;
  decltype(&cudnnGetLastErrorString) lastErrorString = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) setStream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) createDescriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroyDescriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) setAttribute = nullptr;
  decltype(&cudnnBackendGetAttribute) getAttribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
  cudnnHandle_t cudnn = nullptr;
  /// Without a handle: the device planned for (DeviceProperties).
  cudnnBackendDescriptor_t device = nullptr;

  ~Library() {
    if (cudnn)
      destroy(cudnn);
    if (device)
      destroyDescriptor(device);
  }

  /// cuDNN's name for `status`, and its last error message where it left
  /// one.
  std::string describe(cudnnStatus_t status) const {
    std::string text = errorString(status), last = lastError();
    return last.empty() ? text : text + ": " + last;
  }

  /// cuDNN's last error message (cudnnGetLastErrorString), or empty; cuDNN
  /// clears it.
  std::string lastError() const {
    char last[512] = "";
    lastErrorString(last, sizeof last);
    return last;
  }
};

namespace {

using Library = CudnnAttention::Library;

/// Loads libcudnn.so.9 (the loader's search path, then the CUDA toolkit's
/// library directory this runtime was built against) and resolves the entry
/// points; an empty string on success, else why it failed.
std::string load(Library &lib) {
  const char *names[] = {"libcudnn.so.9",
#ifdef SHARDC_CUDA_LIBRARY_DIR
                         SHARDC_CUDA_LIBRARY_DIR "/libcudnn.so.9"
#endif
  };
  std::string tried;
  for (const char *name : names) {
    lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib.handle)
      break;
    const char *error = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (error ? error : name);
  }
  if (!lib.handle)
    return "cuDNN not loaded (" + tried + ")";
  bool missing = false;
  auto resolve = [&](auto &entry, const char *symbol) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
        dlsym(lib.handle, symbol));
    missing |= entry == nullptr;
  };
  resolve(lib.getVersion, "cudnnGetVersion");
  resolve(lib.errorString, "cudnnGetErrorString");
  resolve(lib.lastErrorString, "cudnnGetLastErrorString");
  resolve(lib.create, "cudnnCreate");
  resolve(lib.destroy, "cudnnDestroy");
  resolve(lib.setStream, "cudnnSetStream");
  resolve(lib.createDescriptor, "cudnnBackendCreateDescriptor");
  resolve(lib.destroyDescriptor, "cudnnBackendDestroyDescriptor");
  resolve(lib.setAttribute, "cudnnBackendSetAttribute");
  resolve(lib.getAttribute, "cudnnBackendGetAttribute");
  resolve(lib.finalize, "cudnnBackendFinalize");
  resolve(lib.execute, "cudnnBackendExecute");
  if (missing)
    return "cuDNN loaded, but without the backend API of cuDNN 9";
  // The graphs are those cudnn-frontend builds from cuDNN 9.16 on: before
  // it, it zeroes dq's accumulator itself (below 9.6; from 9.6 the backend
  // does, so backward leaves it as it is), masks with the
  // lowest float (below 9.10), refuses the backward (9.10.0, 9.10.1) or
  // pads T to 128 (up to 9.15). 9.x's ABI is stable.
  size_t version = lib.getVersion();
  if (version < 91600)
    return "cuDNN " + std::to_string(version / 10000) + "." +
           std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100) +
           ": the attention graphs need 9.16 or later";
  return "";
}

} // namespace

//===--- Graphs -----------------------------------------------------------===//

namespace {

/// One AttentionGraph as cuDNN's backend descriptors, and its execution
/// plan. Each step records the first failure (the step and cuDNN's words)
/// and does nothing after one; the descriptors live as long as the object.
class Graph {
public:
  Graph(const Library &lib, const AttentionGraph &graph) : lib(lib) {
    std::map<int64_t, cudnnBackendDescriptor_t> tensors;
    for (const AttentionGraph::Tensor &t : graph.tensors)
      tensors[t.uid] = tensor(t);
    auto operand = [&](int64_t uid) { return uid ? tensors.at(uid) : nullptr; };
    for (const AttentionGraph::Operation &op : graph.operations) {
      cudnnBackendDescriptor_t x = operand(op.x), b = operand(op.b),
                               t = operand(op.t), y = operand(op.y);
      switch (op.kind) {
      case AttentionGraph::Kind::Matmul:
        matmul(x, b, y);
        break;
      case AttentionGraph::Kind::Pointwise:
        pointwise(op.mode, x, b, t, y, op.axis);
        break;
      case AttentionGraph::Kind::Reduction:
        reduction(op.mode, x, y);
        break;
      case AttentionGraph::Kind::Reshape:
        reshape(x, y);
        break;
      }
    }
  }
  ~Graph() {
    for (auto it = owned.rbegin(); it != owned.rend(); ++it)
      lib.destroyDescriptor(*it);
  }
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  /// The first failure, or empty.
  const std::string &error() const { return failure; }

  /// The operation graph of the graph's operations and the engines cuDNN's
  /// heuristics (mode A) rank for it; with a handle, the execution plan of
  /// the first that takes it (its kernels compiled: NVRTC) and its
  /// workspace size. Without one, for `device` (cuDNN's device properties:
  /// no GPU needed), the engines are only fetched and counted.
  void plan(cudnnHandle_t cudnn, cudnnBackendDescriptor_t device = nullptr) {
    // cuDNN keeps its last error message until it is read (reading clears
    // it): one left from before would pass for this graph's.
    lib.lastError();
    cudnnBackendDescriptor_t graph =
        make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(operations.size()), operations.data());
    if (cudnn)
      set(graph, kGraphHandle, CUDNN_TYPE_HANDLE, 1, &cudnn);
    finalize(graph, "operation graph");
    cudnnBackendDescriptor_t heuristics =
        make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    setDescriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (!cudnn)
      setDescriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, device);
    finalize(heuristics, "heuristics");
    if (!failure.empty())
      return;
    check(lib.getAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &engines, nullptr),
          "heuristics' engine count");
    if (!failure.empty())
      return;
    // The engines themselves: cuDNN may hand back fewer than it counted
    // (none, for some graphs no engine takes), so the count is theirs.
    std::vector<cudnnBackendDescriptor_t> configs(engines);
    for (cudnnBackendDescriptor_t &config : configs)
      config = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    check(lib.getAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                           CUDNN_TYPE_BACKEND_DESCRIPTOR, engines, &engines,
                           configs.data()),
          "heuristics' engines");
    if (failure.empty() && engines == 0) {
      std::string why = lib.lastError();
      failure = "cuDNN's heuristics found no engine for the graph" +
                (why.empty() ? "" : " (" + why + ")");
    }
    if (!failure.empty() || !cudnn)
      return;
    std::string refusals;
    for (int64_t i = 0; i < engines && failure.empty() && !executionPlan; ++i) {
      cudnnBackendDescriptor_t candidate =
          make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      set(candidate, kPlanHandle, CUDNN_TYPE_HANDLE, 1, &cudnn);
      setDescriptor(candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                    configs[i]);
      if (!failure.empty())
        return;
      cudnnStatus_t status = lib.finalize(candidate);
      if (status != CUDNN_STATUS_SUCCESS) {
        refusals +=
            "; engine " + std::to_string(i) + ": " + lib.describe(status);
        continue;
      }
      // The scratch allocator aborts where the device runs out of memory:
      // an engine asking for more than kMaxWorkspaceBytes is passed over
      // for the next (with none left, the shape runs on the flash kernels).
      int64_t bytes = 0, returned = 0;
      check(lib.getAttribute(candidate,
                             CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                             CUDNN_TYPE_INT64, 1, &returned, &bytes),
            "workspace size");
      if (!failure.empty())
        return;
      if (bytes > kMaxWorkspaceBytes) {
        refusals += "; engine " + std::to_string(i) + ": a workspace of " +
                    std::to_string(bytes) + " bytes";
        continue;
      }
      executionPlan = candidate;
      workspace = static_cast<size_t>(bytes);
    }
    if (!failure.empty())
      return;
    if (!executionPlan)
      failure = "none of the " + std::to_string(engines) +
                " engines cuDNN ranked took the graph" + refusals;
  }

  /// How many engines cuDNN's heuristics ranked for the graph (plan).
  int64_t engineCount() const { return engines; }

  /// Runs the plan on the handle's stream with `pointers` bound to `uids`
  /// (a by-value tensor's pointer is its host value's): empty, else what
  /// cuDNN refused (the variant pack, or the execution).
  std::string execute(cudnnHandle_t cudnn, const std::vector<int64_t> &uids,
                      const std::vector<void *> &pointers,
                      void *workspaceData) const {
    if (!executionPlan)
      return "no execution plan (planned for device properties only)";
    cudnnBackendDescriptor_t pack = nullptr;
    cudnnStatus_t status =
        lib.createDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    const char *step = "variant pack";
    if (status == CUDNN_STATUS_SUCCESS)
      status = lib.setAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                CUDNN_TYPE_INT64,
                                static_cast<int64_t>(uids.size()), uids.data());
    if (status == CUDNN_STATUS_SUCCESS)
      status = lib.setAttribute(
          pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
          static_cast<int64_t>(pointers.size()), pointers.data());
    if (status == CUDNN_STATUS_SUCCESS)
      status = lib.setAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                CUDNN_TYPE_VOID_PTR, 1, &workspaceData);
    if (status == CUDNN_STATUS_SUCCESS)
      status = lib.finalize(pack);
    if (status == CUDNN_STATUS_SUCCESS) {
      step = "cudnnBackendExecute";
      status = lib.execute(cudnn, executionPlan, pack);
    }
    std::string why = status == CUDNN_STATUS_SUCCESS
                          ? ""
                          : std::string(step) + ": " + lib.describe(status);
    if (pack)
      lib.destroyDescriptor(pack);
    return why;
  }

  size_t workspaceBytes() const { return workspace; }

private:
  /// The most workspace a plan may take: 1 GiB.
  static constexpr int64_t kMaxWorkspaceBytes = int64_t(1) << 30;
  // The handle's attributes: deprecated in cuDNN 9.x in favour of device
  // properties, but what cuDNN's frontend still sets; named by value once
  // here, away from the deprecation warnings.
  static constexpr cudnnBackendAttributeName_t kGraphHandle =
      static_cast<cudnnBackendAttributeName_t>(800);
  static constexpr cudnnBackendAttributeName_t kPlanHandle =
      static_cast<cudnnBackendAttributeName_t>(400);

  const Library &lib;
  std::vector<cudnnBackendDescriptor_t> owned, operations;
  cudnnBackendDescriptor_t executionPlan = nullptr;
  size_t workspace = 0;
  int64_t engines = 0;
  std::string failure;

  static cudnnDataType_t dataType(AttentionGraph::Type type) {
    switch (type) {
    case AttentionGraph::Type::F32:
      return CUDNN_DATA_FLOAT;
    case AttentionGraph::Type::Bf16:
      return CUDNN_DATA_BFLOAT16;
    case AttentionGraph::Type::I32:
      return CUDNN_DATA_INT32;
    case AttentionGraph::Type::Bool:
      return CUDNN_DATA_BOOLEAN;
    }
    return CUDNN_DATA_FLOAT;
  }

  static cudnnPointwiseMode_t pointwiseMode(AttentionGraph::Mode mode) {
    using Mode = AttentionGraph::Mode;
    switch (mode) {
    case Mode::Mul:
      return CUDNN_POINTWISE_MUL;
    case Mode::Add:
      return CUDNN_POINTWISE_ADD;
    case Mode::Sub:
      return CUDNN_POINTWISE_SUB;
    case Mode::Div:
      return CUDNN_POINTWISE_DIV;
    case Mode::Exp:
      return CUDNN_POINTWISE_EXP;
    case Mode::Log:
      return CUDNN_POINTWISE_LOG;
    case Mode::GenIndex:
      return CUDNN_POINTWISE_GEN_INDEX;
    case Mode::CmpGe:
      return CUDNN_POINTWISE_CMP_GE;
    case Mode::Select:
      return CUDNN_POINTWISE_BINARY_SELECT;
    case Mode::Identity:
      return CUDNN_POINTWISE_IDENTITY;
    case Mode::None:
    case Mode::Max:
    case Mode::Sum:
      break;
    }
    std::abort(); // a reduction's mode on a pointwise operation: a bug in
                  // AttentionGraph.cpp's data
  }

  /// A tensor the caller binds by uid (16-byte aligned, as the frontend
  /// declares every tensor), or a virtual one, or a by-value scalar.
  cudnnBackendDescriptor_t tensor(const AttentionGraph::Tensor &t) {
    cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    cudnnDataType_t type = dataType(t.type);
    int64_t alignment = 16;
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t.uid);
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, t.dims.data());
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, t.strides.data());
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &t.isVirtual);
    if (t.byValue)
      set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &t.byValue);
    finalize(d, "tensor " + std::to_string(t.uid));
    return d;
  }

  /// Computed in f32 (a comparison in booleans, as the frontend has it).
  void pointwise(AttentionGraph::Mode mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                 cudnnBackendDescriptor_t y, int64_t axis) {
    cudnnBackendDescriptor_t p = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnPointwiseMode_t cudnnMode = pointwiseMode(mode);
    cudnnDataType_t precision = mode == AttentionGraph::Mode::CmpGe
                                    ? CUDNN_DATA_BOOLEAN
                                    : CUDNN_DATA_FLOAT;
    std::string what = "pointwise mode " + std::to_string(cudnnMode);
    set(p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &cudnnMode);
    set(p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    if (axis >= 0)
      set(p, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(p, what);
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, p);
    setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b)
      setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t)
      setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    setDescriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    operation(op, what);
  }

  /// f32 accumulation.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    finalize(m, "matmul");
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    setDescriptor(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
    operation(op, "matmul");
  }

  void reduction(AttentionGraph::Mode mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnReduceTensorOp_t cudnnMode = mode == AttentionGraph::Mode::Max
                                          ? CUDNN_REDUCE_TENSOR_MAX
                                          : CUDNN_REDUCE_TENSOR_ADD;
    cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
        &cudnnMode);
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    finalize(r, "reduction");
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    setDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    setDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    setDescriptor(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    operation(op, "reduction");
  }

  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    setDescriptor(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    setDescriptor(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    operation(op, "reshape");
  }

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    if (!failure.empty())
      return nullptr;
    if (check(lib.createDescriptor(type, &d),
              "descriptor type " + std::to_string(type)))
      owned.push_back(d);
    return d;
  }

  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void *value) {
    if (failure.empty())
      check(lib.setAttribute(d, name, type, count, value),
            "attribute " + std::to_string(name));
  }

  void setDescriptor(cudnnBackendDescriptor_t d,
                     cudnnBackendAttributeName_t name,
                     cudnnBackendDescriptor_t value) {
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }

  void finalize(cudnnBackendDescriptor_t d, const std::string &what) {
    if (failure.empty())
      check(lib.finalize(d), what);
  }

  void operation(cudnnBackendDescriptor_t op, const std::string &what) {
    finalize(op, what);
    operations.push_back(op);
  }

  /// Whether `status` is success; else records the failure of `what`.
  bool check(cudnnStatus_t status, const std::string &what) {
    if (status == CUDNN_STATUS_SUCCESS)
      return true;
    if (failure.empty())
      failure = what + ": " + lib.describe(status);
    return false;
  }
};

} // namespace

//===--- Attention --------------------------------------------------------===//

/// A shape's forward and backward plans, or why there are none.
struct CudnnAttention::Plans {
  std::unique_ptr<Graph> forward, backward;
  std::string declined;
};

CudnnAttention::CudnnAttention(cudaStream_t stream)
    : library(std::make_unique<Library>()) {
  unavailable = load(*library);
  if (!unavailable.empty())
    return;
  cudnnStatus_t status = library->create(&library->cudnn);
  if (status == CUDNN_STATUS_SUCCESS)
    status = library->setStream(library->cudnn, stream);
  if (status != CUDNN_STATUS_SUCCESS)
    unavailable = "cuDNN's handle: " + library->describe(status);
}

CudnnAttention::CudnnAttention(const DeviceProperties &device)
    : library(std::make_unique<Library>()) {
  unavailable = load(*library);
  if (!unavailable.empty())
    return;
  Library &lib = *library;
  cudnnStatus_t status =
      lib.createDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &lib.device);
  if (status == CUDNN_STATUS_SUCCESS)
    status = lib.setAttribute(
        lib.device, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
        static_cast<int64_t>(device.json.size()), device.json.data());
  if (status == CUDNN_STATUS_SUCCESS)
    status = lib.finalize(lib.device);
  if (status != CUDNN_STATUS_SUCCESS)
    unavailable = "cuDNN's device properties: " + lib.describe(status);
}

// plans (the descriptors) go before library (what destroys them): declared
// after it.
CudnnAttention::~CudnnAttention() = default;

size_t CudnnAttention::version() const {
  return unavailable.empty() ? library->getVersion() : 0;
}

CudnnAttention::Plans &CudnnAttention::plansFor(const AttentionShape &shape) {
  std::unique_ptr<Plans> &slot = plans[shape];
  if (slot)
    return *slot;
  slot = std::make_unique<Plans>();
  Plans &p = *slot;
  if (!unavailable.empty()) {
    p.declined = unavailable;
    return p;
  }
  if (shape.heads <= 0 || shape.c % shape.heads != 0) {
    p.declined = "heads do not divide the channels";
    return p;
  }
  // cudnn-frontend refuses the backward of a single query and key.
  if (shape.t < 2) {
    p.declined = "T = 1: cuDNN's fused attention backward takes no single "
                 "query and key";
    return p;
  }
  // cuDNN's support surface on sm_90 (cudnn-frontend's
  // sdpa_support_surface.h): heads of 16-byte rows, up to 256 elements;
  // with d % 8 == 0, k and v start 16 bytes apart in qkv's rows.
  int64_t d = shape.c / shape.heads;
  if (d % 8 != 0 || d > 256) {
    p.declined = "heads of " + std::to_string(d) +
                 " elements: cuDNN's fused attention takes multiples of 8 "
                 "up to 256";
    return p;
  }
  p.forward = std::make_unique<Graph>(*library, attentionForwardGraph(shape));
  p.forward->plan(library->cudnn, library->device);
  if (!p.forward->error().empty()) {
    p.declined = "forward: " + p.forward->error();
    return p;
  }
  p.backward = std::make_unique<Graph>(*library, attentionBackwardGraph(shape));
  p.backward->plan(library->cudnn, library->device);
  if (!p.backward->error().empty())
    p.declined = "backward: " + p.backward->error();
  return p;
}

const std::string &CudnnAttention::declines(const AttentionShape &shape) {
  return plansFor(shape).declined;
}

std::pair<int64_t, int64_t>
CudnnAttention::engineCounts(const AttentionShape &shape) {
  Plans &p = plansFor(shape);
  return {p.forward ? p.forward->engineCount() : 0,
          p.backward ? p.backward->engineCount() : 0};
}

size_t CudnnAttention::forwardWorkspaceBytes(const AttentionShape &shape) {
  Plans &p = plansFor(shape);
  return p.declined.empty() ? p.forward->workspaceBytes() : 0;
}

size_t CudnnAttention::backwardWorkspaceBytes(const AttentionShape &shape) {
  Plans &p = plansFor(shape);
  return p.declined.empty()
             ? attentionDqAccumulatorBytes(shape) +
                   attentionRowDotsBytes(shape) + p.backward->workspaceBytes()
             : 0;
}

namespace {

/// The tensors a call binds; null where the graph has none.
struct Tensors {
  const void *qkv, *out, *lse, *dy, *dqkv, *dqAccumulator, *rowDots;
};

/// Runs `graph` with `bindings` (AttentionGraph.h's: which tensor, how far
/// in) over `tensors`; empty, else what cuDNN refused.
std::string run(const Graph &graph, cudnnHandle_t cudnn,
                const std::vector<AttentionBinding> &bindings,
                const Tensors &tensors, void *workspace) {
  using Buffer = AttentionBinding::Buffer;
  std::vector<int64_t> uids;
  std::vector<void *> pointers;
  for (const AttentionBinding &b : bindings) {
    const void *base = nullptr;
    size_t element = 2; // bf16, but for the f32 tensors below
    switch (b.buffer) {
    case Buffer::Qkv:
      base = tensors.qkv;
      break;
    case Buffer::Out:
      base = tensors.out;
      break;
    case Buffer::Dy:
      base = tensors.dy;
      break;
    case Buffer::Dqkv:
      base = tensors.dqkv;
      break;
    case Buffer::Lse:
      base = tensors.lse, element = 4;
      break;
    case Buffer::DqAccumulator:
      base = tensors.dqAccumulator, element = 4;
      break;
    case Buffer::RowDots:
      base = tensors.rowDots, element = 4;
      break;
    case Buffer::Scalar: // by value: its host address
      base = &b.value, element = 0;
      break;
    }
    uids.push_back(b.uid);
    pointers.push_back(const_cast<char *>(static_cast<const char *>(base)) +
                       b.offset * static_cast<int64_t>(element));
  }
  return graph.execute(cudnn, uids, pointers, workspace);
}

} // namespace

bool CudnnAttention::forward(const AttentionShape &shape,
                             const __nv_bfloat16 *qkv, __nv_bfloat16 *out,
                             float *lse, void *workspace) {
  Plans &p = plansFor(shape);
  if (!p.declined.empty())
    return false;
  std::string why =
      run(*p.forward, library->cudnn, attentionForwardBindings(shape),
          {qkv, out, lse, nullptr, nullptr, nullptr, nullptr}, workspace);
  if (!why.empty())
    p.declined = "forward: " + why;
  return why.empty();
}

bool CudnnAttention::backward(const AttentionShape &shape,
                              const __nv_bfloat16 *dy, const __nv_bfloat16 *qkv,
                              const __nv_bfloat16 *out, const float *lse,
                              __nv_bfloat16 *dqkv, void *workspace) {
  Plans &p = plansFor(shape);
  if (!p.declined.empty())
    return false;
  // The workspace: dq's accumulator, the rows' dot(do, o), then cuDNN's.
  char *dqAccumulator = static_cast<char *>(workspace);
  char *rowDots = dqAccumulator + attentionDqAccumulatorBytes(shape);
  std::string why =
      run(*p.backward, library->cudnn, attentionBackwardBindings(shape),
          {qkv, out, lse, dy, dqkv, dqAccumulator, rowDots},
          rowDots + attentionRowDotsBytes(shape));
  if (!why.empty())
    p.declined = "backward: " + why;
  return why.empty();
}

} // namespace shardc::rt::cuda
