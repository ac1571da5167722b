# The fused optimizers over flat storage (FlatParameters, FusedSGD, FusedAdam,
# FusedAdamW). Compiled outside the unity batches: the element loops need the
# dynamic vectoriser cost model (as the shared-memory all-reduce's do), and
# leaving the batches alone keeps their grouping as it was.
set(_accelerate_fused_sources
  ${CMAKE_CURRENT_LIST_DIR}/flat_parameters.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fused_optimizers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fused_step_kernels.cpp)
target_sources(accelerate PRIVATE ${_accelerate_fused_sources})
set_source_files_properties(${_accelerate_fused_sources} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
# The element loops: at -O2 GCC vectorises a loop of unknown length only under
# the dynamic cost model (-O3's default), and a square root only when it need
# not set errno (the loops never read errno). -fno-math-errno changes a
# predefined macro, so the file does without the precompiled header.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fused_step_kernels.cpp PROPERTIES
  COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU>:-fvect-cost-model=dynamic>;$<$<CXX_COMPILER_ID:GNU,Clang>:-fno-math-errno>"
  SKIP_PRECOMPILE_HEADERS ON)
