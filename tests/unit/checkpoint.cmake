# checkpoint tests (include()d from CMakeLists.txt here).
accelerate_add_unit_test(checkpoint_unit_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp)
if(ACCELERATE_HAVE_HDF5)
  target_link_libraries(checkpoint_unit_test PRIVATE HDF5::HDF5)
endif()
accelerate_add_unit_test(checkpoint_safetensors_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_safetensors_test.cpp)
