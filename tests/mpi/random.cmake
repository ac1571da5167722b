# random tests at 1, 2 and 4 ranks (include()d from CMakeLists.txt here).
