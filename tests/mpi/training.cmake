# training tests at 1, 2 and 4 ranks (include()d from CMakeLists.txt here).
include(${CMAKE_CURRENT_LIST_DIR}/distributed_model.cmake)
accelerate_add_mpi_test(accelerator_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_test.cpp
                        NPROCS 1 2 4 TIMEOUT 240 LABELS training gpu)
# Training-loop misuse (docs/troubleshooting.md): each check refuses its misuse on the step it happens.
accelerate_add_mpi_test(accelerator_misuse_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_misuse_test.cpp
                        NPROCS 1 2 TIMEOUT 120 LABELS training gpu)
accelerate_add_mpi_test(accelerator_lifetime_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_lifetime_test.cpp
                        NPROCS 1 2 4 TIMEOUT 120 LABELS training gpu)
if(ACCELERATE_HAVE_HDF5)
  accelerate_add_mpi_test(accelerator_checkpoint_test
                          SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_checkpoint_test.cpp
                          NPROCS 1 2 4 TIMEOUT 240 LABELS training checkpoint gpu)
  # Asynchronous save_state: its writer thread needs MPI_THREAD_MULTIPLE.
  accelerate_add_mpi_test(async_save_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/async_save_test.cpp
                          NPROCS 1 2 4 TIMEOUT 180 LABELS training checkpoint gpu)
  # Two tiers of storage: node-local files copied to the shared directory.
  accelerate_add_mpi_test(two_tier_checkpoint_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/two_tier_checkpoint_test.cpp
                          NPROCS 1 2 4 TIMEOUT 180 LABELS training checkpoint gpu)
  foreach(n 1 2 4)
    set_property(TEST async_save_test_np${n} two_tier_checkpoint_test_np${n}
                 PROPERTY ENVIRONMENT ACCELERATE_MPI_THREAD_LEVEL=multiple)
  endforeach()
endif()
# Accelerator::profile(): Chrome traces per rank with the library's named ranges.
accelerate_add_mpi_test(profiler_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/profiler_test.cpp
                        NPROCS 1 2 4 TIMEOUT 180 LABELS training gpu LINK nlohmann_json::nlohmann_json)
# LocalSGD: parameter averaging every k steps against an in-process simulation.
accelerate_add_mpi_test(local_sgd_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/local_sgd_test.cpp
                        NPROCS 1 2 4 TIMEOUT 120 LABELS training gpu)
# save_state/load_state progress: lines in a log, a bar on a pseudo-terminal, main process only.
if(ACCELERATE_HAVE_HDF5)
  accelerate_add_mpi_test(checkpoint_progress_test
                          SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_progress_test.cpp
                          NPROCS 1 2 4 TIMEOUT 120 LABELS training checkpoint gpu)
endif()
# mixed_precision "fp16" on the CPU through the Accelerator (LibTorch 2.5 and newer; skips on older).
accelerate_add_mpi_test(accelerator_fp16_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_fp16_test.cpp
                        NPROCS 1 2 4 TIMEOUT 120 LABELS training amp)
# FullyShardedModel (ZeRO stage 3) against a reference trained on every rank's data in one process.
accelerate_add_mpi_test(fully_sharded_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/fully_sharded_test.cpp
                        NPROCS 1 2 4 TIMEOUT 120 LABELS training)
# FULL_SHARD of the GPT of jobs/gpt (custom modules, tied head) by class, size, marking; unmarked units named.
accelerate_add_mpi_test(fully_sharded_transformer_test
                        SOURCES ${CMAKE_CURRENT_LIST_DIR}/fully_sharded_transformer_test.cpp
                        NPROCS 1 2 4 TIMEOUT 120 LABELS training)
# Activation checkpointing: the same gradients as without, plain, under DDP and in FULL_SHARD units; misuse named.
accelerate_add_mpi_test(activation_checkpoint_test
                        SOURCES ${CMAKE_CURRENT_LIST_DIR}/activation_checkpoint_test.cpp
                        NPROCS 1 2 TIMEOUT 120 LABELS training)
# ShardedOptimizer (ZeRO stages 1 and 2) against DDP with the whole optimizer.
accelerate_add_mpi_test(sharded_optimizer_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sharded_optimizer_test.cpp
                        NPROCS 1 2 4 TIMEOUT 120 LABELS training)
# Sharded training through the Accelerator (fsdp_plugin SHARD_GRAD_OP) against NO_SHARD, resumed.
# One gradient-sync strategy per sharding_strategy, as the Accelerator builds it.
accelerate_add_mpi_test(gradient_sync_strategy_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/gradient_sync_strategy_test.cpp
                        NPROCS 1 2 TIMEOUT 60 LABELS training)
if(ACCELERATE_HAVE_HDF5)
  # Sharded optimizer state saved whole, resumed under other shardings and rank counts.
  accelerate_add_mpi_test(sharded_checkpoint_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sharded_checkpoint_test.cpp
                          NPROCS 1 2 4 TIMEOUT 120 LABELS training checkpoint)
  # FULL_SHARD (FullyShardedModel) through the Accelerator against NO_SHARD, resumed across shardings.
  accelerate_add_mpi_test(accelerator_full_shard_test
                          SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_full_shard_test.cpp
                          NPROCS 1 2 4 TIMEOUT 120 LABELS training checkpoint gpu)
  accelerate_add_mpi_test(accelerator_sharding_test
                          SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_sharding_test.cpp
                          NPROCS 1 2 4 TIMEOUT 120 LABELS training checkpoint gpu)
  # Tied weights (a head sharing the embedding's weight) stepped, clipped, saved and loaded once, against a
  # plain single-process loop over the distinct parameters.
  accelerate_add_mpi_test(tied_weights_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tied_weights_test.cpp
                          NPROCS 1 2 TIMEOUT 120 LABELS training checkpoint)
endif()
# The fused optimizers through Accelerator::prepare against torch::optim's, NO_SHARD and SHARD_GRAD_OP; resumed.
accelerate_add_mpi_test(fused_optimizers_prepare_test
                        SOURCES ${CMAKE_CURRENT_LIST_DIR}/fused_optimizers_prepare_test.cpp
                        NPROCS 1 2 TIMEOUT 120 LABELS training checkpoint)
