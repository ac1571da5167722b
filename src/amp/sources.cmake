# Sources of the amp module (include()d from src/CMakeLists.txt).
target_sources(accelerate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/autocast.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_scaler.cpp)
