# The CUDA backend (src/backend/cuda/*.cu), included after the k3 library target. ON by
# default when nvcc is found. Only the library gets CUDA objects (tests and tools link them
# through k3), which keeps CI's CUDA compile small; without a device at run time every GPU test
# skips (cuda_available() is false).
include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
   AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  option(K3_CUDA "Build the CUDA backend (sm_90a, cuBLAS)" ON)
else()
  option(K3_CUDA "Build the CUDA backend (sm_90a, cuBLAS)" OFF)
endif()

if(K3_CUDA)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90a)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  file(GLOB_RECURSE K3_CUDA_SOURCES CONFIGURE_DEPENDS src/*.cu)
  target_sources(k3 PRIVATE ${K3_CUDA_SOURCES})
  # C++17 for the .cu files (CMake 3.25 does not know nvcc 13 accepts C++20).
  set_target_properties(k3 PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}" CUDA_STANDARD 17
                                     CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  target_compile_definitions(k3 PRIVATE K3_HAVE_CUDA=1
                             K3_CUDA_LIB_DIR="${CUDAToolkit_LIBRARY_DIR}")
  target_compile_options(k3 PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda
                         -lineinfo -Xcompiler=-Wall>)
  # cuBLAS is dlopen'ed at first use (runtime.cuh says why): only its headers here.
  target_link_libraries(k3 PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS})
  target_include_directories(k3 PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  message(STATUS "K3_CUDA on: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, ${CMAKE_CUDA_ARCHITECTURES}")
else()
  message(STATUS "K3_CUDA off (no nvcc): CPU backend only")
endif()

# bench/cuda: the device benchmarks (not built by default; scripts/gpu-check.sh builds them).
if(K3_CUDA)
  file(GLOB K3_CUDA_BENCH_SOURCES CONFIGURE_DEPENDS bench/cuda/*.cpp)
  add_executable(k3_bench_cuda EXCLUDE_FROM_ALL ${K3_CUDA_BENCH_SOURCES})
  set_target_properties(k3_bench_cuda PROPERTIES OUTPUT_NAME k3-bench-cuda
                                                 RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
  target_include_directories(k3_bench_cuda PRIVATE src)
  target_compile_definitions(k3_bench_cuda PRIVATE K3_HAVE_CUDA=1)
  target_link_libraries(k3_bench_cuda PRIVATE k3 CUDA::cudart_static CUDA::cublas)
endif()
