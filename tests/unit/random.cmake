# random tests (include()d from CMakeLists.txt here).
accelerate_add_unit_test(random_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/random_test.cpp TIMEOUT 60 LABELS gpu)
