// Builds against the package exactly as a user program would.
#include <accelerate/accelerate.hpp>

#include <iostream>

int main() {
  const accelerate::State state;
  std::cout << "consumer: " << state.describe() << " (Accelerate-HPC " << accelerate::config::version << ")\n";
  return state.num_processes() == 1 ? 0 : 1;
}
