# training tests (include()d from CMakeLists.txt here).
