#include "ddp/engine.h"
#include "ddp/distributed_data_parallel.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/TensorImpl.h>

#include <sstream>
#include <unordered_set>

#include "backend/c10d/process_group_ringx.h"

namespace ringx::ddp {
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

Engine::Engine(const NamedTensors& parameters, const NamedTensors& buffers,
               c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, Options options)
    : processGroup_(std::move(processGroup)), options_(options) {
  TORCH_CHECK(processGroup_, "ringx.ddp: no process group (initialise torch.distributed first)");
  TORCH_CHECK(options_.bucket_cap_mb() > 0, "ringx.ddp: bucket_cap_mb must be positive, got ",
              options_.bucket_cap_mb());
  // A parameter shared by two modules appears twice; it is one gradient.
  NamedTensors unique;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& named : parameters) {
    if (seen.insert(named.second.unsafeGetTensorImpl()).second) unique.push_back(named);
  }
  verifyParameterShapes(processGroup_, unique);

  std::vector<at::Tensor> state;
  for (const auto& named : unique) state.push_back(named.second);
  for (const auto& named : buffers) {
    buffers_.push_back(named.second);
    state.push_back(named.second);
  }
  broadcastFromRankZero(processGroup_, state);

  std::vector<at::Tensor> trainable;
  std::vector<std::string> names;
  for (const auto& [name, p] : unique) {
    if (!p.requires_grad()) continue;
    trainable.push_back(p);
    names.push_back(name);
  }
  ReducerOptions reducerOptions;
  reducerOptions.bucketCapBytes = static_cast<int64_t>(options_.bucket_cap_mb() * 1024 * 1024);
  reducerOptions.bucketCapBytes = std::max<int64_t>(reducerOptions.bucketCapBytes, 1);
  reducerOptions.firstBucketBytes = std::min<int64_t>(1 << 20, reducerOptions.bucketCapBytes);
  reducerOptions.findUnusedParameters = options_.find_unused_parameters();
  reducerOptions.gradientAsBucketView = options_.gradient_as_bucket_view();
  reducerOptions.staticGraph = options_.static_graph();
  reducer_ = std::make_unique<Reducer>(std::move(trainable), std::move(names), processGroup_,
                                       reducerOptions);
}

void Engine::beforeForward() {
  armed_ = at::GradMode::is_enabled() && requireBackwardGradSync_;
  if (armed_) reducer_->prepareForForward();
  if (options_.broadcast_buffers() && !buffers_.empty()) {
    broadcastFromRankZero(processGroup_, buffers_);
  }
}

void Engine::afterForward(const std::vector<at::Tensor>& outputs) {
  if (!armed_) return;
  armed_ = false;
  reducer_->prepareForBackward(outputs);
}

namespace detail {
NamedTensors named(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  NamedTensors out;
  for (const auto& item : dict) out.emplace_back(item.key(), item.value());
  return out;
}
}  // namespace detail

}  // namespace ringx::ddp
