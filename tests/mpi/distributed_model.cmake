# DistributedModel tests.
accelerate_add_mpi_test(distributed_model_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/distributed_model_test.cpp
                        NPROCS 1 2 4 TIMEOUT 180 LABELS training gpu)
# PowerSGD and batched PowerSGD gradient compression.
accelerate_add_mpi_test(power_sgd_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/power_sgd_test.cpp
                        NPROCS 1 2 4 TIMEOUT 120 LABELS training)
