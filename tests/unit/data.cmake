# Unit tests of data/ (index-level sharding; no MPI, no LibTorch in the code
# under test). include()d from tests/unit/CMakeLists.txt.
accelerate_add_unit_test(batch_sampler_shard_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/batch_sampler_shard_test.cpp LABELS data)
accelerate_add_unit_test(iterable_dataset_shard_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/iterable_dataset_shard_test.cpp LABELS data)
