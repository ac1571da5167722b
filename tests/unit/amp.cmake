# amp tests (include()d from CMakeLists.txt here).
accelerate_add_unit_test(amp_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/amp_test.cpp TIMEOUT 60 LABELS gpu)
