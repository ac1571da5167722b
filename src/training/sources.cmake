# Sources of the training module (include()d from src/CMakeLists.txt).
