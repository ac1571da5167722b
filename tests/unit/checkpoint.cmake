# checkpoint tests (include()d from CMakeLists.txt here).
