# training tests at 1, 2 and 4 ranks (include()d from CMakeLists.txt here).
include(${CMAKE_CURRENT_LIST_DIR}/distributed_model.cmake)
