# The worker daemon's own sources (included by worker/CMakeLists.txt into ak_worker).
target_sources(ak_worker PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/device.cc
  ${CMAKE_CURRENT_LIST_DIR}/supervisor.cc
  ${CMAKE_CURRENT_LIST_DIR}/outbox.cc
  ${CMAKE_CURRENT_LIST_DIR}/agent.cc
  ${CMAKE_CURRENT_LIST_DIR}/coordinator_link.cc
  ${CMAKE_CURRENT_LIST_DIR}/worker_id.cc
  ${CMAKE_CURRENT_LIST_DIR}/sandbox_job_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/kernelbench_job_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/kernelbench_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/python_step.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_job_runner.cc
)
target_link_libraries(ak_worker PUBLIC ak_kernelbench ak_models cppzmq spdlog::spdlog PkgConfig::XXHASH Threads::Threads)
