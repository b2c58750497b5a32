#include "backend/c10d/model_sync.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <sstream>

#include "backend/c10d/process_group_ringx.h"

namespace ringx::c10d_glue {
namespace {

// ringx's broadcast buckets; PyTorch uses 250 MiB for module state.
constexpr int64_t kBroadcastBucketBytes = 16ll << 20;

// Per parameter: dtype, rank, then the sizes.
std::vector<int64_t> describe(const NamedTensors& parameters) {
  std::vector<int64_t> out;
  for (const auto& [name, p] : parameters) {
    out.push_back(static_cast<int64_t>(p.scalar_type()));
    out.push_back(p.dim());
    for (int64_t size : p.sizes()) out.push_back(size);
  }
  return out;
}

struct Described {
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
};

std::vector<Described> parse(const int64_t* data, int64_t count) {
  std::vector<Described> out;
  for (int64_t i = 0; i + 1 < count;) {
    Described d{static_cast<at::ScalarType>(data[i]), {}};
    const int64_t dim = data[i + 1];
    i += 2;
    for (int64_t k = 0; k < dim && i < count; ++k) d.sizes.push_back(data[i++]);
    out.push_back(std::move(d));
  }
  return out;
}

std::string show(const Described& d) {
  std::ostringstream out;
  out << c10::toString(d.dtype) << " " << c10::IntArrayRef(d.sizes);
  return out.str();
}

}  // namespace

void verifyParameterShapes(const c10::intrusive_ptr<::c10d::ProcessGroup>& processGroup,
                           const NamedTensors& parameters, const char* who) {
  const int size = processGroup->getSize();
  const int rank = processGroup->getRank();
  const std::vector<int64_t> mine = describe(parameters);
  // Descriptions differ in length when models differ: agree on the longest first.
  at::Tensor length = at::full({1}, static_cast<int64_t>(mine.size()), at::kLong);
  std::vector<at::Tensor> lengthList{length};
  ::c10d::AllreduceOptions maxOptions;
  maxOptions.reduceOp = ::c10d::ReduceOp::MAX;
  processGroup->allreduce(lengthList, maxOptions)->wait();
  const int64_t longest = length.item<int64_t>();
  // [count, description..., padding]
  at::Tensor local = at::zeros({longest + 1}, at::kLong);
  local.data_ptr<int64_t>()[0] = static_cast<int64_t>(mine.size());
  std::copy(mine.begin(), mine.end(), local.data_ptr<int64_t>() + 1);
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (int r = 0; r < size; ++r) gathered[0].push_back(at::empty_like(local));
  std::vector<at::Tensor> input{local};
  processGroup->allgather(gathered, input)->wait();

  const std::vector<Described> reference = parse(mine.data(), static_cast<int64_t>(mine.size()));
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const int64_t* data = gathered[0][r].data_ptr<int64_t>();
    const std::vector<Described> theirs = parse(data + 1, data[0]);
    for (size_t i = 0; i < std::max(theirs.size(), reference.size()); ++i) {
      if (i >= theirs.size() || i >= reference.size()) {
        TORCH_CHECK(false, who, ": rank ", rank, " has ", reference.size(), " parameters but rank ",
                    r, " has ", theirs.size(),
                    "; every rank must construct the same model before wrapping it (first "
                    "parameter present on only one side: index ",
                    i, i < parameters.size() ? " '" + parameters[i].first + "'" : std::string(),
                    ")");
      }
      const bool same =
          theirs[i].dtype == reference[i].dtype && theirs[i].sizes == reference[i].sizes;
      TORCH_CHECK(same, who, ": parameter '", parameters[i].first, "' (index ", i, ") is ",
                  show(reference[i]), " on rank ", rank, " but ", show(theirs[i]), " on rank ", r,
                  "; every rank must construct the same model before wrapping it");
    }
  }
}

void broadcastFromRankZero(const c10::intrusive_ptr<::c10d::ProcessGroup>& processGroup,
                           std::vector<at::Tensor> tensors) {
  if (tensors.empty() || processGroup->getSize() == 1) return;
  at::NoGradGuard noGrad;
  for (at::Tensor& t : tensors) t = t.detach();  // same storage, no autograd bookkeeping
  if (auto* ringx = c10d_glue::ringxBackendOf(processGroup)) {
    ringx->broadcastCoalesced(tensors, 0, kBroadcastBucketBytes);
  } else {
    ::c10d::broadcast_coalesced(processGroup, tensors, 250ull << 20, 0);
  }
}

}  // namespace ringx::c10d_glue
