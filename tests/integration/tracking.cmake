# tracking integration tests (include()d from CMakeLists.txt here).
if(ACCELERATE_HAVE_TENSORBOARD)
  # TensorBoard's own Python reader (PyPI, in a cached venv) opens our event files.
  add_executable(tensorboard_job ${CMAKE_CURRENT_LIST_DIR}/tensorboard_job.cpp)
  accelerate_use_test_pch(tensorboard_job)
  target_link_libraries(tensorboard_job PRIVATE AccelerateHPC::accelerate)
  add_test(NAME tensorboard_reader
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/tensorboard_reader_test.sh $<TARGET_FILE:tensorboard_job>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(tensorboard_reader PROPERTIES
    PROCESSORS 4 TIMEOUT 600 LABELS "integration;tracking"
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endif()
