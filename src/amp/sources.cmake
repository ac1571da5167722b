# Sources of the amp module (include()d from src/CMakeLists.txt).
