# training integration tests (include()d from CMakeLists.txt here).
if(TARGET accelerate_train_job AND ACCELERATE_HAVE_HDF5)
  add_test(NAME train_job
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/train_job_test.sh $<TARGET_FILE:accelerate_train_job>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(train_job PROPERTIES PROCESSORS 4 TIMEOUT 600 LABELS "integration;training"
    ENVIRONMENT ACCELERATE_EXPECT_TENSORBOARD=${ACCELERATE_HAVE_TENSORBOARD})
endif()
# The porting guide's job (docs/porting.md): the C++ side of an Accelerate script.
if(TARGET porting AND ACCELERATE_HAVE_HDF5)
  add_test(NAME porting_job
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/porting_job_test.sh $<TARGET_FILE:porting> ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(porting_job PROPERTIES PROCESSORS 4 TIMEOUT 600 LABELS "integration;training")
endif()

# A transformer as LibTorch users write it (jobs/gpt, docs/training.md): every
# strategy and rank count ends at one loss; killed, resumed on half the ranks.
if(TARGET gpt AND ACCELERATE_HAVE_HDF5)
  add_test(NAME gpt_job
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/gpt_job_test.sh $<TARGET_FILE:gpt> ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(gpt_job PROPERTIES PROCESSORS 4 TIMEOUT 600 LABELS "integration;training")
endif()
