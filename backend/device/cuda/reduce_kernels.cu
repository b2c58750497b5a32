// The GPU reduction kernels (see reduce_kernels.h).
//
// One grid-stride kernel template per (storage type, element functor), chosen through the
// table the CPU kernels use (visitElementOp). Each thread handles 16-byte packs: when the three
// pointers are 16-byte aligned, a pack is one vector load per operand and one vector store
// (128-bit memory transactions, what memory bandwidth needs); the elements that do not fill a
// pack, and every element when a pointer is not aligned, go one at a time. The element
// functions are the CPU's (element_ops.h), so results are bit-identical to the CPU kernels:
// float16/bfloat16 are widened, combined in float and rounded with c10's algorithms, not with
// CUDA's __half arithmetic (which would round the same but write a different NaN).
#include "backend/device/cuda/reduce_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/reduce/element_ops.h"
#include "backend/reduce/reduce.h"
#include "base/error.h"

namespace ringx::cuda {
namespace {

using reduce::ComplexPair;

constexpr int kThreads = 256;
constexpr size_t kPackBytes = 16;

template <typename T>
struct alignas(kPackBytes) Pack {
  static constexpr int kCount = kPackBytes / sizeof(T) > 0 ? kPackBytes / sizeof(T) : 1;
  T v[kCount];
};

template <typename T, typename Op>
__global__ void reduceKernel(T* out, const T* a, const T* b, size_t count, bool packed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (packed) {
    using P = Pack<T>;
    const size_t packs = count / P::kCount;
    for (size_t p = first; p < packs; p += stride) {
      const P x = reinterpret_cast<const P*>(a)[p];
      const P y = reinterpret_cast<const P*>(b)[p];
      P r;
#pragma unroll
      for (int k = 0; k < P::kCount; ++k) r.v[k] = Op::apply(x.v[k], y.v[k]);
      reinterpret_cast<P*>(out)[p] = r;
    }
    done = packs * P::kCount;
  }
  for (size_t i = done + first; i < count; i += stride) out[i] = Op::apply(a[i], b[i]);
}

// x / divisor or x * factor in the arithmetic torch's div_/mul_ use for the type.
template <typename T>
struct Scale {
  using Math = T;  // float and double
  static __device__ __forceinline__ T apply(T x, Math s, bool divide) {
    return divide ? x / s : x * s;
  }
};

template <typename Bits>
struct HalfScale {
  using Math = float;
  static __device__ __forceinline__ uint16_t apply(uint16_t x, float s, bool divide) {
    const float f = Bits::toFloat(x);
    return Bits::fromFloat(divide ? f / s : f * s);
  }
};

template <typename T>
struct ComplexScale {
  using Math = T;
  static __device__ __forceinline__ ComplexPair<T> apply(ComplexPair<T> x, T s, bool divide) {
    return divide ? ComplexPair<T>{x.re / s, x.im / s} : ComplexPair<T>{x.re * s, x.im * s};
  }
};

template <typename T, typename S>
__global__ void scaleKernel(T* data, typename S::Math s, bool divide, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] = S::apply(data[i], s, divide);
  }
}

// Enough blocks to cover `work` items a thread each, capped: the grid-stride loops take the
// rest, and a few thousand resident blocks fill any current GPU.
unsigned blocksFor(size_t work) {
  const size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 4096));
}

void checkLaunch(const char* what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    RINGX_THROW(Error, "ringx: launching the CUDA ", what,
                " kernel failed: ", cudaGetErrorString(error));
  }
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kPackBytes == 0; }

void scaleOn(DataType type, void* data, double value, bool divide, size_t count, void* stream) {
  if (count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = blocksFor(count);
  switch (type) {
    case DataType::kFloat32:
      scaleKernel<float, Scale<float>><<<blocks, kThreads, 0, s>>>(
          static_cast<float*>(data), static_cast<float>(value), divide, count);
      break;
    case DataType::kFloat64:
      scaleKernel<double, Scale<double>>
          <<<blocks, kThreads, 0, s>>>(static_cast<double*>(data), value, divide, count);
      break;
    case DataType::kFloat16:
      scaleKernel<uint16_t, HalfScale<reduce::Fp16Bits>><<<blocks, kThreads, 0, s>>>(
          static_cast<uint16_t*>(data), static_cast<float>(value), divide, count);
      break;
    case DataType::kBFloat16:
      scaleKernel<uint16_t, HalfScale<reduce::Bf16Bits>><<<blocks, kThreads, 0, s>>>(
          static_cast<uint16_t*>(data), static_cast<float>(value), divide, count);
      break;
    case DataType::kComplex64:
      scaleKernel<ComplexPair<float>, ComplexScale<float>><<<blocks, kThreads, 0, s>>>(
          static_cast<ComplexPair<float>*>(data), static_cast<float>(value), divide, count);
      break;
    case DataType::kComplex128:
      scaleKernel<ComplexPair<double>, ComplexScale<double>><<<blocks, kThreads, 0, s>>>(
          static_cast<ComplexPair<double>*>(data), value, divide, count);
      break;
    default:
      RINGX_THROW(InvalidArgument, "ringx: ", divide ? "AVG" : "PREMUL_SUM",
                  " needs a floating point or complex tensor, got ", dataTypeName(type));
  }
  checkLaunch(divide ? "divide" : "multiply");
}

}  // namespace

void reduce(ReduceOp op, DataType type, void* out, const void* a, const void* b, size_t count,
            void* stream) {
  reduce::checkSupported(op, type);  // the CPU kernels' check and message
  if (count == 0) return;
  const bool packed = aligned(out) && aligned(a) && aligned(b);
  const bool known = reduce::visitElementOp(op, type, [&]<typename T, typename Op>() {
    const size_t work = packed ? (count + Pack<T>::kCount - 1) / Pack<T>::kCount : count;
    reduceKernel<T, Op><<<blocksFor(work), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), count, packed);
  });
  RINGX_CHECK(known, "ringx: no CUDA reduce kernel for ", reduceOpName(op), " on ",
              dataTypeName(type));
  checkLaunch("reduce");
}

void divide(DataType type, void* data, double divisor, size_t count, void* stream) {
  scaleOn(type, data, divisor, true, count, stream);
}

void multiply(DataType type, void* data, double factor, size_t count, void* stream) {
  scaleOn(type, data, factor, false, count, stream);
}

bool deviceAvailable(std::string* why) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    if (why) {
      *why = error == cudaSuccess || error == cudaErrorNoDevice
                 ? std::string("no CUDA device")
                 : std::string("no CUDA device (") + cudaGetErrorString(error) + ")";
    }
    cudaGetLastError();  // reset the error state so that later CUDA calls do not report it
    return false;
  }
  return true;
}

}  // namespace ringx::cuda
