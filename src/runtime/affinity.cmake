# NUMA affinity sources (include()d from src/CMakeLists.txt).
