# DistributedModel and its gradient reducer.
target_sources(accelerate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/distributed_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gradient_bucket_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gradient_reducer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/power_sgd.cpp)
