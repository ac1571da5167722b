# checkpoint tests (include()d from CMakeLists.txt here).
accelerate_add_unit_test(checkpoint_unit_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp)
# With ISA-L the test insists that its kernel is among those checked.
target_compile_definitions(checkpoint_unit_test PRIVATE ACCELERATE_HAVE_ISAL_FOR_TESTS=${ACCELERATE_HAVE_ISAL})
if(ACCELERATE_HAVE_HDF5)
  target_link_libraries(checkpoint_unit_test PRIVATE HDF5::HDF5)
endif()
accelerate_add_unit_test(checkpoint_safetensors_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_safetensors_test.cpp)
