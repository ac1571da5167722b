# Data loaders at 1, 2 and 4 ranks (include()d from tests/mpi/CMakeLists.txt).
accelerate_add_mpi_test(data_loader_shard_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/data_loader_shard_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS data gpu)
accelerate_add_mpi_test(data_loader_dispatcher_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/data_loader_dispatcher_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS data)
accelerate_add_mpi_test(stream_data_loader_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/stream_data_loader_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS data)
accelerate_add_mpi_test(structured_batches_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/structured_batches_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS data)
accelerate_add_mpi_test(dict_batches_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/dict_batches_test.cpp NPROCS 1 2 4 TIMEOUT 180 LABELS data)
# MPI_THREAD_FUNNELED kept: every MPI call the library makes goes through the
# guard (tests/common/funneled_guard.cpp), which notes calls off the main
# thread. ENABLE_EXPORTS puts its definitions in the dynamic symbol table, so
# the library's calls bind to them.
accelerate_add_mpi_test(funneled_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/funneled_test.cpp ${PROJECT_SOURCE_DIR}/tests/common/funneled_guard.cpp
  NPROCS 2 4 TIMEOUT 120 LABELS data STANDALONE)
set_target_properties(funneled_test PROPERTIES ENABLE_EXPORTS ON)
