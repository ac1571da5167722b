#include "detail/job_step.hpp"

#include <atomic>

namespace accelerate::detail {
namespace {
std::atomic<std::int64_t> noted_step{-1};
}  // namespace

void note_training_step(std::int64_t step) noexcept { noted_step.store(step, std::memory_order_relaxed); }

std::string at_training_step() {
  const std::int64_t step = noted_step.load(std::memory_order_relaxed);
  return step < 0 ? std::string() : " at training step " + std::to_string(step);
}

}  // namespace accelerate::detail
