# Data loaders at 1, 2 and 4 ranks (include()d from tests/mpi/CMakeLists.txt).
accelerate_add_mpi_test(data_loader_shard_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/data_loader_shard_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS data gpu)
accelerate_add_mpi_test(data_loader_dispatcher_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/data_loader_dispatcher_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS data)
accelerate_add_mpi_test(stream_data_loader_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/stream_data_loader_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS data)
