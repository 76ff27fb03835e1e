# Tests of the kernel registry, the compiler and the sandbox. The compiler is compiled into its
# tests directly (not through ak_worker) so they need none of the daemon's dependencies.
ak_test(kernels_registry_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels_registry_test.cc
  LIBS ak_kernels)
ak_test(tuned_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuned_test.cc LIBS ak_kernels)

ak_test(measure_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/measure_test.cc LIBS ak_measure LABELS worker)
ak_test(datasheet_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/datasheet_test.cc LIBS ak_measure LABELS worker)

ak_test(compiler_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/compiler_test.cc ${CMAKE_SOURCE_DIR}/worker/compiler.cc
  LIBS ak_kernels ak_triton_script CUDA::nvrtc CUDA::toolkit ${CMAKE_DL_LIBS})
add_dependencies(compiler_test autokernel-nvrtc)

if(AK_BUILD_SANDBOX)
  # The comparison rule on hand-made tensors (libtorch on the CPU, no sandbox process).
  ak_test(sandbox_tolerance_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sandbox_tolerance_test.cc
          LIBS ak_kernels_torch ak_sandbox_tolerance)
  set_target_properties(sandbox_tolerance_test PROPERTIES BUILD_RPATH "${AK_TORCH_LIB_DIR}")
  # launch_plan (what export --hf writes) against the candidates' own launches, through a
  # recording driver on CPU tensors.
  ak_test(launch_plan_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/launch_plan_test.cc
          LIBS ak_kernels_torch ak_sandbox_tolerance)
  set_target_properties(launch_plan_test PROPERTIES BUILD_RPATH "${AK_TORCH_LIB_DIR}")
  # Which slot each call's TMA tensor maps go to, by a host copy or the writer kernel, eager and
  # under a CUDA graph's capture, through a recording driver on CPU tensors.
  ak_test(tensor_maps_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tensor_maps_test.cc
          LIBS ak_kernels_torch ak_sandbox_tolerance)
  set_target_properties(tensor_maps_test PROPERTIES BUILD_RPATH "${AK_TORCH_LIB_DIR}")
  # One source, two executables: the gpu one (label `gpu`) is built with AK_SANDBOX_GPU_TESTS; it
  # skips where the machine has no GPU and fails where it has one that the sandbox cannot set up.
  foreach(kind IN ITEMS cpu gpu)
    set(name sandbox_test)
    set(labels "")
    if(kind STREQUAL "gpu")
      set(name sandbox_gpu_test)
      set(labels gpu)
    endif()
    ak_test(${name}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/sandbox_test.cc ${CMAKE_SOURCE_DIR}/worker/compiler.cc
      LIBS ak_kernels ak_triton_script CUDA::nvrtc CUDA::toolkit ${CMAKE_DL_LIBS}
      LABELS ${labels})
    if(kind STREQUAL "gpu")
      target_compile_definitions(${name} PRIVATE AK_SANDBOX_GPU_TESTS=1)
    endif()
    add_dependencies(${name} autokernel-sandbox autokernel-nvrtc)
  endforeach()
endif()
