# checkpoint tests at 1, 2 and 4 ranks (include()d from CMakeLists.txt here).
if(ACCELERATE_HAVE_HDF5)
  accelerate_add_mpi_test(checkpoint_io_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_io_test.cpp NPROCS 1 2 4 TIMEOUT 240 LINK HDF5::HDF5)
  accelerate_add_mpi_test(checkpoint_commit_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_commit_test.cpp NPROCS 1 2 4 TIMEOUT 180)
  # File size against the data (padding, metadata blocks) and the alignment of large datasets.
  accelerate_add_mpi_test(checkpoint_file_size_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_file_size_test.cpp NPROCS 1 2 4 TIMEOUT 120 LINK HDF5::HDF5)
else()
  # Builds without HDF5: the checkpoint API links and throws FeatureNotBuilt.
  accelerate_add_mpi_test(checkpoint_without_hdf5_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_without_hdf5_test.cpp NPROCS 1 2 TIMEOUT 120)
endif()
