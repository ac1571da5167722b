# NUMA affinity sources (include()d from src/CMakeLists.txt).
# The placement logic and the public API build everywhere; the hwloc side
# only with hwloc (without it the API throws FeatureNotBuilt).
target_sources(accelerate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/numa_affinity.cpp
  ${CMAKE_CURRENT_LIST_DIR}/numa_affinity_gpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/numa_affinity_placement.cpp)
if(ACCELERATE_HAVE_HWLOC)
  target_sources(accelerate PRIVATE ${CMAKE_CURRENT_LIST_DIR}/numa_affinity_topology.cpp)
  target_link_libraries(accelerate PRIVATE accelerate_hwloc)
endif()
