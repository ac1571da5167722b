# Unit tests of data/ that need no MPI: index-level sharding, and the
# default collate. include()d from tests/unit/CMakeLists.txt.
accelerate_add_unit_test(batch_sampler_shard_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/batch_sampler_shard_test.cpp LABELS data)
accelerate_add_unit_test(iterable_dataset_shard_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/iterable_dataset_shard_test.cpp LABELS data)
# The default collate's stacking, against torch::stack.
accelerate_add_unit_test(default_collate_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/default_collate_test.cpp LABELS data)
# The padding collate of token batches.
accelerate_add_unit_test(padding_collate_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/padding_collate_test.cpp LABELS data)
