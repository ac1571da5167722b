# Fault injection (include()d from CMakeLists.txt here): one rank SIGKILLed
# inside each collective family, at 2 and 4 ranks, under mpirun and under
# srun against a Slurm started on localhost, and at 2 ranks under an mpirun
# that leaves the survivors running, so that only our own deadlines can end
# them (fault_job.cpp, fault_injection_test.sh).
add_executable(fault_job ${CMAKE_CURRENT_LIST_DIR}/fault_job.cpp)
accelerate_use_test_pch(fault_job)
target_link_libraries(fault_job PRIVATE AccelerateHPC::accelerate)

foreach(n 2 4)
  add_test(NAME fault_injection_mpirun_np${n}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/fault_injection_test.sh ${n} $<TARGET_FILE:fault_job> mpirun
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
  set_tests_properties(fault_injection_mpirun_np${n} PROPERTIES
    PROCESSORS ${n} TIMEOUT 600 LABELS "mpi;integration;faults")
  add_test(NAME fault_injection_srun_np${n}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/fault_injection_test.sh ${n} $<TARGET_FILE:fault_job> srun ${_srun_plugin})
  set_tests_properties(fault_injection_srun_np${n} PROPERTIES
    PROCESSORS ${n} TIMEOUT 600 LABELS "mpi;integration;launching;faults" RESOURCE_LOCK slurm
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
endforeach()

add_test(NAME fault_injection_survivors_np2
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/fault_injection_test.sh 2 $<TARGET_FILE:fault_job> mpirun-survivors
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS})
set_tests_properties(fault_injection_survivors_np2 PROPERTIES
  PROCESSORS 2 TIMEOUT 600 LABELS "mpi;integration;faults"
  SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
