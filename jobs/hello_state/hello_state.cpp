// hello_state: every rank reports where it runs, in rank order, then the
// main process prints a summary. The smallest complete Accelerate-HPC job.
//
//   mpirun -np 2 ./hello_state
//   srun -n 2 --mpi=pmix ./hello_state
#include <accelerate/accelerate.hpp>

#include <exception>
#include <iostream>

int main() {
  try {
    const accelerate::State state;
    const accelerate::Logger log(state, "hello_state", &std::cout);
    log.info(state.describe(), {.main_process_only = false, .in_order = true});
    state.print("hello_state: " + std::to_string(state.num_processes()) + " process(es) on " +
                std::to_string(state.num_nodes()) + " node(s), distributed type " +
                std::string(accelerate::to_string(state.distributed_type())));
    return 0;
  } catch (const std::exception& error) {
    accelerate::abort_all(error.what());
  }
}
