# The torch that ringx builds against, and what the build must match in it.
#
# Read from the torch package's files, never by importing it: an unpacked wheel is enough
# (scripts/torch_matrix.sh compiles against every release that way, and a CUDA torch need not
# load on a machine without its CUDA libraries to be built against).
#
#   RINGX_TORCH_DIR   a torch package directory (site-packages/torch, or the torch/ folder of an
#                     unpacked wheel); default: the torch that Python3_EXECUTABLE would import.
#
# Sets RINGX_TORCH_DIR, RINGX_TORCH_VERSION (torch.__version__), RINGX_TORCH_CUDA (the CUDA
# version torch was built with; empty for a CPU build), RINGX_TORCH_CXX11_ABI (0 or 1), and
# TORCH_LIBRARIES (the target ringx::torch) and TORCH_PYTHON_LIBRARY.

# The releases ringx is tested against (make torch-matrix; pyproject.toml's dependency and
# python/build_backend/ringx_build.py name the same range).
set(RINGX_TORCH_OLDEST 2.9)
set(RINGX_TORCH_NEWEST 2.15)

if(NOT RINGX_TORCH_DIR)
  # find_spec locates the package without running it.
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
      "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s else '')"
    OUTPUT_VARIABLE RINGX_TORCH_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT RINGX_TORCH_DIR)
    message(FATAL_ERROR "ringx: ${Python3_EXECUTABLE} has no torch. Install torch "
      "(${RINGX_TORCH_OLDEST} to ${RINGX_TORCH_NEWEST}) into that environment, run "
      "scripts/setup.sh (or make), or pass -DRINGX_TORCH_DIR=<a torch package directory>.")
  endif()
endif()
get_filename_component(RINGX_TORCH_DIR "${RINGX_TORCH_DIR}" ABSOLUTE)
if(NOT EXISTS "${RINGX_TORCH_DIR}/version.py" OR NOT EXISTS "${RINGX_TORCH_DIR}/include/torch")
  message(FATAL_ERROR "ringx: ${RINGX_TORCH_DIR} is not a torch package with C++ headers "
    "(version.py, include/torch); point RINGX_TORCH_DIR at the torch folder of a torch wheel or "
    "installation")
endif()

# version.py: __version__ = '2.11.0+cu130' and cuda: Optional[str] = '13.0' (or None).
file(STRINGS "${RINGX_TORCH_DIR}/version.py" version_lines REGEX "^(__version__|cuda)[:= ]")
set(RINGX_TORCH_VERSION "")
set(RINGX_TORCH_CUDA "")
foreach(line IN LISTS version_lines)
  if(line MATCHES "^__version__ *= *'([^']+)'")
    set(RINGX_TORCH_VERSION "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^cuda[^=]*= *'([^']+)'")
    set(RINGX_TORCH_CUDA "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT RINGX_TORCH_VERSION)
  message(FATAL_ERROR "ringx: no __version__ in ${RINGX_TORCH_DIR}/version.py")
endif()
string(REGEX MATCH "^[0-9]+\\.[0-9]+" RINGX_TORCH_MINOR "${RINGX_TORCH_VERSION}")
if(RINGX_TORCH_MINOR VERSION_LESS RINGX_TORCH_OLDEST)
  message(FATAL_ERROR "ringx: torch ${RINGX_TORCH_VERSION} (${RINGX_TORCH_DIR}) is older than "
    "${RINGX_TORCH_OLDEST}, the oldest release ringx supports; install torch "
    "${RINGX_TORCH_OLDEST} to ${RINGX_TORCH_NEWEST}")
elseif(RINGX_TORCH_MINOR VERSION_GREATER RINGX_TORCH_NEWEST)
  message(WARNING "ringx: torch ${RINGX_TORCH_VERSION} is newer than ${RINGX_TORCH_NEWEST}, the "
    "newest release ringx was tested with; building anyway (backend/c10d/torch_compat.h is "
    "where a new release's differences go)")
endif()

# The libstdc++ ABI torch was built with: its libraries' mangled names say it (std::__cxx11).
file(GLOB c10_library "${RINGX_TORCH_DIR}/lib/libc10.so*")
if(NOT c10_library)
  message(FATAL_ERROR "ringx: ${RINGX_TORCH_DIR}/lib has no libc10.so")
endif()
list(GET c10_library 0 c10_library)
file(STRINGS "${c10_library}" cxx11_names REGEX "__cxx11" LIMIT_COUNT 1)
if(cxx11_names)
  set(RINGX_TORCH_CXX11_ABI 1)
else()
  set(RINGX_TORCH_CXX11_ABI 0)
endif()

# The torch libraries as one imported target, ringx::torch (TORCH_LIBRARIES names it), made here
# rather than by torch's own CMake config (TorchConfig.cmake): for a CUDA torch that config
# insists on a full CUDA toolkit (nvrtc included) even to build code without CUDA, where ringx
# wants a CUDA torch without nvcc to give a CPU-only build (cpp_extension does the same).
# The defines are those torch's targets give their users; none changes a class's layout.
add_library(ringx_torch INTERFACE)
add_library(ringx::torch ALIAS ringx_torch)
target_include_directories(ringx_torch SYSTEM INTERFACE "${RINGX_TORCH_DIR}/include"
  "${RINGX_TORCH_DIR}/include/torch/csrc/api/include")
# (The ABI define is the whole build's, CMakeLists.txt: the torch-free libraries link in too.)
target_compile_definitions(ringx_torch INTERFACE USE_DISTRIBUTED USE_C10D_GLOO USE_RPC
  USE_TENSORPIPE)
set(torch_library_names torch torch_cpu c10)
if(RINGX_TORCH_CUDA)
  list(APPEND torch_library_names torch_cuda c10_cuda)
endif()
foreach(name IN LISTS torch_library_names)
  find_library(RINGX_TORCH_${name}_LIBRARY ${name} PATHS "${RINGX_TORCH_DIR}/lib" NO_DEFAULT_PATH)
  if(NOT RINGX_TORCH_${name}_LIBRARY)
    message(FATAL_ERROR "ringx: ${RINGX_TORCH_DIR}/lib has no lib${name}.so")
  endif()
  # Imported targets, so that programs get the run path to them.
  add_library(ringx::torch_${name} SHARED IMPORTED)
  set_target_properties(ringx::torch_${name} PROPERTIES
    IMPORTED_LOCATION "${RINGX_TORCH_${name}_LIBRARY}")
  target_link_libraries(ringx_torch INTERFACE ringx::torch_${name})
endforeach()
# A CUDA torch's libraries need the CUDA libraries of pip's nvidia-* wheels beside it; a program
# linked against them must let the linker find those (a Python module need not).
file(GLOB nvidia_library_dirs LIST_DIRECTORIES true "${RINGX_TORCH_DIR}/../nvidia/*/lib")
foreach(dir IN LISTS nvidia_library_dirs)
  target_link_options(ringx_torch INTERFACE "-Wl,-rpath-link,${dir}")
endforeach()
find_library(TORCH_PYTHON_LIBRARY torch_python PATHS "${RINGX_TORCH_DIR}/lib" NO_DEFAULT_PATH)
set(TORCH_LIBRARIES ringx::torch)
