# checkpoint integration tests (include()d from CMakeLists.txt here).
if(ACCELERATE_HAVE_HDF5)
  add_executable(checkpoint_job ${CMAKE_CURRENT_LIST_DIR}/checkpoint_job.cpp)
  accelerate_use_test_pch(checkpoint_job)
  target_link_libraries(checkpoint_job PRIVATE AccelerateHPC::accelerate)

  add_test(NAME checkpoint_reshard
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_reshard_test.sh $<TARGET_FILE:checkpoint_job>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(checkpoint_reshard PROPERTIES PROCESSORS 4 TIMEOUT 600 LABELS "integration")

  foreach(n 2 4)
    add_test(NAME checkpoint_kill_np${n}
      COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_kill_test.sh ${n} $<TARGET_FILE:checkpoint_job>
              ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
    set_tests_properties(checkpoint_kill_np${n} PROPERTIES PROCESSORS ${n} TIMEOUT 400 LABELS "integration")
  endforeach()

  add_test(NAME checkpoint_h5tools
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_h5tools_test.sh $<TARGET_FILE:checkpoint_job>
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(checkpoint_h5tools PROPERTIES PROCESSORS 2 TIMEOUT 300 LABELS "integration"
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endif()

if(ACCELERATE_HAVE_HDF5)
  add_test(NAME checkpoint_safetensors_python
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_safetensors_test.sh $<TARGET_FILE:checkpoint_job>)
  set_tests_properties(checkpoint_safetensors_python PROPERTIES TIMEOUT 180 LABELS "integration"
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endif()

if(ACCELERATE_HAVE_HDF5)
  # accelerate-hpc inspect on a real checkpoint, intact and then damaged.
  add_test(NAME checkpoint_inspect
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_inspect_test.sh $<TARGET_FILE:checkpoint_job>
            $<TARGET_FILE:accelerate_cli> ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(checkpoint_inspect PROPERTIES PROCESSORS 2 TIMEOUT 180 LABELS "integration"
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endif()

if(ACCELERATE_HAVE_HDF5)
  # accelerate-hpc convert --to safetensors of a real checkpoint, checked byte for byte against the HDF5 data.
  add_test(NAME checkpoint_convert
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_convert_test.sh $<TARGET_FILE:checkpoint_job>
            $<TARGET_FILE:accelerate_cli> ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(checkpoint_convert PROPERTIES PROCESSORS 2 TIMEOUT 180 LABELS "integration"
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endif()
