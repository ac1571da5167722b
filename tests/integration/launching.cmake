# launching tests (include()d from CMakeLists.txt here).

# The Slurm job script of the training program, submitted to a real Slurm on
# localhost: a run to completion with HDF5 checkpoints, a preempted run that
# requeues and resumes, and srun -n 4 directly. _srun_plugin is chosen in
# CMakeLists.txt from the MPI the tests launch with.
if(TARGET accelerate_train_job)
  add_test(NAME slurm_train
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/slurm_train_test.sh $<TARGET_FILE:accelerate_train_job> ${_srun_plugin}
            ${PROJECT_SOURCE_DIR}/jobs/slurm/train.sbatch)
  # The longest launching test (its requeued run waits for the old run's
  # credentials to expire, cred_expire in slurm_up.sh): it holds one slot and
  # starts first (COST), so the rest of the suite runs beside it.
  set_tests_properties(slurm_train PROPERTIES
    PROCESSORS 1 COST 10000 TIMEOUT 900 LABELS "integration;slow;launching" RESOURCE_LOCK slurm
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endif()

# jobs/local/mpirun.sh: a stop request checkpoints (exit 75), the same command resumes.
if(TARGET accelerate_train_job)
  add_test(NAME local_mpirun_train
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/local_mpirun_test.sh $<TARGET_FILE:accelerate_train_job> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(local_mpirun_train PROPERTIES
    PROCESSORS 2 TIMEOUT 600 LABELS "integration;launching"
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endif()
