# Sources of the random module (include()d from src/CMakeLists.txt).
target_sources(accelerate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/generator_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/job_seed.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rng_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/seed.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synchronize.cpp)
