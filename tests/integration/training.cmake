# training integration tests (include()d from CMakeLists.txt here).
