# Sources of the interop module (include()d from src/CMakeLists.txt).
