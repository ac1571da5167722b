# checkpoint tests (include()d from CMakeLists.txt here).
set(_checkpoint_unit_link)
if(ACCELERATE_HAVE_HDF5)
  set(_checkpoint_unit_link HDF5::HDF5)
endif()
# With ISA-L the test insists that its kernel is among those checked.
accelerate_add_unit_test(checkpoint_unit_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp
  DEFINES ACCELERATE_HAVE_ISAL_FOR_TESTS=${ACCELERATE_HAVE_ISAL} LINK ${_checkpoint_unit_link})
accelerate_add_unit_test(checkpoint_safetensors_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_safetensors_test.cpp)
# The aarch64 kernels, cross-compiled and run under emulation.
add_test(NAME crc32c_aarch64_test
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/crc32c_aarch64.sh ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/crc32c_aarch64)
set_tests_properties(crc32c_aarch64_test PROPERTIES
  LABELS "unit" TIMEOUT 120 SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
