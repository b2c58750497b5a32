// What the CUDA tests share: skipping where this machine has no GPU (the build machine
// compiles them; the GPU machine runs them).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backend/device/cuda/reduce_kernels.h"

// In a TEST body: GTEST_SKIP with why no CUDA device is usable ("no CUDA device", the driver's
// error), so the skip says what the machine lacks.
#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    std::string why;                                                \
    if (!::ringx::cuda::deviceAvailable(&why)) GTEST_SKIP() << why; \
  } while (0)
