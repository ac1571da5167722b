# Sources of the checkpoint module (include()d from src/CMakeLists.txt).
