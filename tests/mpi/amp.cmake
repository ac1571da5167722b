# amp tests at 1, 2 and 4 ranks (include()d from CMakeLists.txt here).
accelerate_add_mpi_test(amp_mpi_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/amp_test.cpp NPROCS 1 2 4 TIMEOUT 120 LABELS gpu)
