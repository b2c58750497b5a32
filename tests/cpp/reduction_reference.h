// Inputs whose reduction is exact in every dtype, and the reference result computed here
// (one rank after another): what the collective tests compare every algorithm with.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "backend/reduce/element_ops.h"
#include "backend/reduce/reduce.h"
#include "base/types.h"

namespace ringx::testing {

// Writes small integers (exact in every dtype) into a buffer of `type`.
inline void fill(DataType type, void* data, size_t count, const std::function<int(size_t)>& value) {
  for (size_t i = 0; i < count; ++i) {
    int v = value(i);
    switch (type) {
      case DataType::kFloat32:
        static_cast<float*>(data)[i] = v;
        break;
      case DataType::kFloat64:
        static_cast<double*>(data)[i] = v;
        break;
      case DataType::kFloat16:
        static_cast<uint16_t*>(data)[i] = reduce::Fp16Bits::fromFloat(static_cast<float>(v));
        break;
      case DataType::kBFloat16: {
        float f = static_cast<float>(v);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits >> 16);
        break;
      }
      case DataType::kComplex64:
        static_cast<std::complex<float>*>(data)[i] = {static_cast<float>(v),
                                                      static_cast<float>(v % 2)};
        break;
      case DataType::kComplex128:
        static_cast<std::complex<double>*>(data)[i] = {static_cast<double>(v),
                                                       static_cast<double>(v % 2)};
        break;
      case DataType::kInt8:
        static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v);
        break;
      case DataType::kInt16:
        static_cast<int16_t*>(data)[i] = static_cast<int16_t>(v);
        break;
      case DataType::kInt32:
        static_cast<int32_t*>(data)[i] = v;
        break;
      case DataType::kInt64:
        static_cast<int64_t*>(data)[i] = v;
        break;
      case DataType::kUInt8:
        static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
        break;
      case DataType::kBool:
        static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v & 1);
        break;
    }
  }
}

// Rank r's input value at element i, chosen per op so that any reduction order is exact.
inline int inputValue(ReduceOp op, int rank, size_t i) {
  if (op == ReduceOp::kProduct) {
    static const int factors[] = {1, -1, 2, 1, 1};
    return factors[(rank * 7 + i * 3) % 5];
  }
  return static_cast<int>((rank * 5 + i * 3) % 7) - 3;
}

inline std::vector<char> makeInput(DataType type, ReduceOp op, int rank, size_t count) {
  std::vector<char> buffer(count * elementSize(type) + 1);
  fill(type, buffer.data(), count, [&](size_t i) { return inputValue(op, rank, i); });
  buffer.resize(count * elementSize(type));
  return buffer;
}

inline std::vector<char> expectedReduction(DataType type, ReduceOp op, int size, size_t count) {
  std::vector<char> acc = makeInput(type, op, 0, count);
  for (int r = 1; r < size; ++r) {
    std::vector<char> next = makeInput(type, op, r, count);
    reduce::reduceInPlace(op, type, acc.data(), next.data(), count);
  }
  return acc;
}

// `count` floats in [-0.5, 0.5) from a linear congruential generator seeded with
// `seed`: where the order of a reduction changes the bits.
inline std::vector<float> randomFloats(size_t count, uint32_t seed) {
  std::vector<float> data(count);
  uint32_t state = seed;
  for (auto& x : data) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(state) / 4294967296.0f - 0.5f;
  }
  return data;
}

// What a broadcast test's root sends: byte i is i * 7 + 1, so a misplaced chunk shows.
inline std::vector<char> broadcastPattern(size_t bytes) {
  std::vector<char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 7 + 1);
  return data;
}

// One assertion per buffer, naming the first byte that differs: a gtest assertion per byte of a
// 1 MiB broadcast, on every rank, for every root and world size, was most of what the sanitizer
// legs spent on the broadcast sweeps.
inline ::testing::AssertionResult sameBytes(const std::vector<char>& got,
                                            const std::vector<char>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << got.size() << " bytes where " << want.size() << " were expected";
  }
  const auto differ = std::mismatch(got.begin(), got.end(), want.begin());
  if (differ.first == got.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "byte " << (differ.first - got.begin()) << " is " << int(*differ.first) << ", expected "
         << int(*differ.second);
}

}  // namespace ringx::testing
