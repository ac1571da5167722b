# Sources of the random module (include()d from src/CMakeLists.txt).
