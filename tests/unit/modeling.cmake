# modeling tests (include()d from CMakeLists.txt here): the big-model utilities.
accelerate_add_unit_test(module_sizes_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/module_sizes_test.cpp)
accelerate_add_unit_test(device_map_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_map_test.cpp)
accelerate_add_unit_test(offload_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/offload_test.cpp)
accelerate_add_unit_test(load_checkpoint_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/load_checkpoint_test.cpp)

# The same calls against Hugging Face Accelerate's own functions on the same
# trees built in Python; skips (77) where Accelerate cannot be installed.
add_executable(module_sizes_dump ${CMAKE_CURRENT_LIST_DIR}/module_sizes_dump.cpp)
target_link_libraries(module_sizes_dump PRIVATE AccelerateHPC::accelerate nlohmann_json::nlohmann_json)
add_test(NAME module_sizes_crosscheck
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/module_sizes_crosscheck.sh $<TARGET_FILE:module_sizes_dump>
          ${CMAKE_CURRENT_BINARY_DIR}/module_sizes_crosscheck)
set_tests_properties(module_sizes_crosscheck PROPERTIES
  LABELS "unit" TIMEOUT 600 SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "ACCELERATE_TEST_SKIPPED")
accelerate_add_unit_test(empty_weights_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/empty_weights_test.cpp)
