# Tests of the worker daemon (worker/device, supervisor, outbox, agent); included by
# tests/worker/CMakeLists.txt.

# A stand-in for autokernel-sandbox that speaks worker/sandbox_protocol.h and misbehaves on request.
add_executable(ak_fake_sandbox ${CMAKE_CURRENT_LIST_DIR}/fake_sandbox.cc)
target_link_libraries(ak_fake_sandbox PRIVATE ak_common)

ak_test(device_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_test.cc LIBS ak_worker LABELS worker)
ak_test(cuda_driver_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_driver_test.cc LIBS ak_worker LABELS worker)
ak_test(device_gpu_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_gpu_test.cc LIBS ak_worker LABELS "gpu;worker")
ak_test(outbox_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/outbox_test.cc LIBS ak_worker LABELS worker)
ak_test(supervisor_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/supervisor_test.cc LIBS ak_worker LABELS worker)
add_dependencies(supervisor_test ak_fake_sandbox)
target_compile_definitions(supervisor_test PRIVATE AK_FAKE_SANDBOX="$<TARGET_FILE:ak_fake_sandbox>")
ak_test(agent_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_test.cc LIBS ak_worker LABELS worker)
add_dependencies(agent_test ak_fake_sandbox)
target_compile_definitions(agent_test PRIVATE AK_FAKE_SANDBOX="$<TARGET_FILE:ak_fake_sandbox>")
# The job runners with the fake compiler and sandbox, and a shell script standing in for Python.
ak_test(sandbox_job_runner_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sandbox_job_runner_test.cc LIBS ak_worker LABELS worker)
ak_test(kernelbench_job_runner_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernelbench_job_runner_test.cc LIBS ak_worker
        LABELS worker)
# The model runner with the real pipeline and Python (torch subprocesses, on the CPU).
ak_test(model_job_runner_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_job_runner_test.cc LIBS ak_worker
        LABELS worker PROCESSORS 2)
add_dependencies(model_job_runner_test autokernel_ops)
target_compile_definitions(model_job_runner_test PRIVATE AK_OPS_LIBRARY="$<TARGET_FILE:autokernel_ops>")
# The KernelBench runner with the real harness on the CPU (torch subprocesses).
ak_test(kernelbench_runner_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernelbench_runner_test.cc LIBS ak_worker
        LABELS worker LOCK kb_harness PROCESSORS 2)
# Issue 21: worker ids claimed by lock files, and the warning of a worker that cannot reach its coordinator.
ak_test(worker_id_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/worker_id_test.cc LIBS ak_worker LABELS worker)
ak_test(coordinator_link_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/coordinator_link_test.cc LIBS ak_worker LABELS worker)
ak_test(worker_metrics_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cc LIBS ak_worker_metrics LABELS worker)
