# Sources of the training module (include()d from src/CMakeLists.txt).
include(${CMAKE_CURRENT_LIST_DIR}/distributed_model.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/fused_optimizers.cmake)
target_sources(accelerate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/accelerated_optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/activation_checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/accelerated_scheduler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/accelerator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/accelerator_options.cpp
  ${CMAKE_CURRENT_LIST_DIR}/distinct_parameters.cpp
  ${CMAKE_CURRENT_LIST_DIR}/find_executable_batch_size.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fully_sharded_data_parallel_plugin.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fully_sharded_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gradient_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gradient_sync_strategy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/local_sgd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lr_schedules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/meta_tensor_check.cpp
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_sharded_sync.cpp
  ${CMAKE_CURRENT_LIST_DIR}/parameter_sharded_sync.cpp
  ${CMAKE_CURRENT_LIST_DIR}/replica_groups.cpp
  ${CMAKE_CURRENT_LIST_DIR}/replicated_sync.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_clipping.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sharded_optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sharded_unit_scope.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unit_policy.cpp)
