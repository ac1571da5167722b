# Unit tests of seeded shuffling and exact resume (data/seedable_sampler,
# data/loader_state, data/skip; no MPI, no LibTorch in the code under test).
# include()d from tests/unit/CMakeLists.txt.
accelerate_add_unit_test(seedable_sampler_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/seedable_sampler_test.cpp LABELS data)
accelerate_add_unit_test(loader_state_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/loader_state_test.cpp LABELS data)
