# Sources of the training module (include()d from src/CMakeLists.txt).
include(${CMAKE_CURRENT_LIST_DIR}/distributed_model.cmake)
