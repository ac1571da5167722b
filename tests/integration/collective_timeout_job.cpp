// A job in which the last rank never reaches an all_reduce (it "hangs" in a
// long sleep). With the default policy the waiting ranks must name it and
// abort the whole job within the timeout, instead of hanging forever.
#include <accelerate/accelerate.hpp>
#include <accelerate/comm/process_group.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <thread>

int main() {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state, {.timeout = std::chrono::seconds(2)});
  at::Tensor t = at::ones({16});
  if (state.is_last_process() && state.num_processes() > 1) {
    std::this_thread::sleep_for(std::chrono::minutes(5));
  }
  group->all_reduce(t);
  state.print("all_reduce completed");
  return 0;
}
