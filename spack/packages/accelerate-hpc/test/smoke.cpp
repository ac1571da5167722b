// Two ranks agree on a sum through the library's process group.
#include <accelerate/accelerate.hpp>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
  const int expected = argc > 1 ? std::atoi(argv[1]) : 2;
  const accelerate::State state;
  auto world = accelerate::ProcessGroup::world(state);
  at::Tensor t = at::full({4}, static_cast<double>(state.process_index() + 1), at::kDouble);
  world->all_reduce(t);
  const double want = expected * (expected + 1) / 2.0;
  const bool ok = state.num_processes() == expected && t.eq(want).all().item<bool>();
  std::cout << "smoke: rank " << state.process_index() << "/" << state.num_processes() << " sum "
            << t[0].item<double>() << (ok ? " ok" : " WRONG") << std::endl;
  return ok ? 0 : 1;
}
