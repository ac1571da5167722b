# Sources of the profiling module (include()d from src/CMakeLists.txt).
target_sources(accelerate PRIVATE ${CMAKE_CURRENT_LIST_DIR}/profiler.cpp)
