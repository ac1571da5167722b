// Compiled only so that its target owns the precompiled header the tests
// reuse (tests/CMakeLists.txt); never run.
int main() { return 0; }
