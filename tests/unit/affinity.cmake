# affinity tests (include()d from CMakeLists.txt here).

# Placement logic on hand-built topologies: no hwloc needed.
accelerate_add_unit_test(affinity_placement_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/affinity_placement_test.cpp LABELS affinity)

if(ACCELERATE_HAVE_HWLOC)
  # Two-socket synthetic topologies from hwloc XML (topologies/generate.py).
  accelerate_add_unit_test(affinity_topology_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/affinity_topology_test.cpp LABELS affinity
    DEFINES ACCELERATE_TOPOLOGY_DIR="${CMAKE_CURRENT_LIST_DIR}/topologies")

  # Binding applied on this machine and read back through hwloc.
  accelerate_add_unit_test(affinity_bind_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/affinity_bind_test.cpp LABELS affinity LINK accelerate_hwloc)
endif()
