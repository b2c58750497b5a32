#include "backend/transport/pair.h"

#include <cstring>

#include "base/error.h"

namespace ringx::transport {

uint64_t Pair::postSend(const void* data, size_t bytes) {
  sendPosted_ += bytes;
  if (bytes > 0) {
    sends_.push_back(Op{static_cast<char*>(const_cast<void*>(data)), bytes, 0});
  }
  return sendPosted_;
}

uint64_t Pair::postRecv(void* data, size_t bytes, const ReceiveKernels* streaming) {
  recvPosted_ += bytes;
  if (bytes > 0) {
    Op op{static_cast<char*>(data), bytes, 0};
    op.kernels = streaming;
    recvs_.push_back(op);
  }
  return recvPosted_;
}

uint64_t Pair::postRecvReduce(void* data, size_t count, const ReceiveKernels& kernels,
                              DataType dtype, ReduceOp op, const void* accumulate,
                              double divideBy) {
  const size_t element = elementSize(dtype);
  const size_t bytes = count * element;
  recvPosted_ += bytes;
  if (bytes > 0) {
    recvs_.push_back(Op{static_cast<char*>(data), bytes, 0, true, dtype, op, element,
                        static_cast<const char*>(accumulate), divideBy, &kernels});
  }
  return recvPosted_;
}

void Pair::deliver(const char* from, size_t n) {
  Op& op = recvs_.front();
  char* to = op.data + op.done;
  if (op.reduce) {
    const size_t count = n / op.elementSize;
    const char* a = op.accumulate ? op.accumulate + op.done : to;
    if (op.divideBy != 0) {
      op.kernels->reduceDivided(op.op, op.dtype, to, a, from, count, op.divideBy);
    } else {
      op.kernels->reduce(op.op, op.dtype, to, a, from, count);
    }
  } else if (op.kernels) {
    op.kernels->copyStreaming(to, from, n);
  } else {
    std::memcpy(to, from, n);
  }
  advanceRecv(n);
}

void Pair::advanceSend(size_t n) {
  Op& op = sends_.front();
  op.done += n;
  sendCompleted_.store(sendCompleted() + n, std::memory_order_relaxed);
  RINGX_ENFORCE_LE(op.done, op.size);
  if (op.done == op.size) {
    sends_.pop_front();
  }
}

void Pair::advanceRecv(size_t n) {
  Op& op = recvs_.front();
  op.done += n;
  recvCompleted_.store(recvCompleted() + n, std::memory_order_relaxed);
  RINGX_ENFORCE_LE(op.done, op.size);
  if (op.done == op.size) {
    recvs_.pop_front();
  }
}

std::string Pair::describePending() const {
  std::string out;
  if (!recvs_.empty()) {
    out += strCat("receiving (", recvPosted_ - recvCompleted(), " bytes outstanding)");
  }
  if (!sends_.empty()) {
    out += strCat(out.empty() ? "" : ", ", "sending (", sendPosted_ - sendCompleted(),
                  " bytes outstanding)");
  }
  return out;
}

}  // namespace ringx::transport
