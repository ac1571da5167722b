# Sources of the modeling module, the big-model utilities (include()d from src/CMakeLists.txt).
target_sources(accelerate PRIVATE ${CMAKE_CURRENT_LIST_DIR}/module_sizes.cpp ${CMAKE_CURRENT_LIST_DIR}/module_walk.cpp
                                  ${CMAKE_CURRENT_LIST_DIR}/device_map.cpp ${CMAKE_CURRENT_LIST_DIR}/offload.cpp
                                  ${CMAKE_CURRENT_LIST_DIR}/module_tensors.cpp ${CMAKE_CURRENT_LIST_DIR}/load_checkpoint.cpp
                                  ${CMAKE_CURRENT_LIST_DIR}/empty_weights.cpp)
