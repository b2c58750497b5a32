#include "backend/c10d/torch_errors.h"

#include <c10/util/Exception.h>

#include "base/error.h"

namespace ringx::c10d_glue {
namespace {

template <typename TorchError>
std::exception_ptr convert(std::exception_ptr error, const char* function) {
  if (!error) return error;
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error&) {
    return error;  // already torch's (a store error, a TORCH_CHECK)
  } catch (const ringx::Error& e) {
    return std::make_exception_ptr(
        TorchError(c10::SourceLocation{function, __FILE__, __LINE__}, e.what()));
  } catch (...) {
    return error;
  }
}

}  // namespace

std::exception_ptr asBackendError(std::exception_ptr error) {
  return convert<c10::DistBackendError>(error, "ringx collective");
}

std::exception_ptr asNetworkError(std::exception_ptr error) {
  return convert<c10::DistNetworkError>(error, "ringx group setup");
}

}  // namespace ringx::c10d_glue
