# Sources of the tracking module (include()d from src/CMakeLists.txt).
target_sources(accelerate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/file_trackers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tracker.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tracker_set.cpp)
