// The training step this process is at, for the reports of errors that end a
// job (a collective's timeout, the blocking-call watchdog): "at training step
// 120" tells whoever reads the log where the job was when a peer vanished.
//
// The Accelerator notes each real optimizer step; the value is process-wide
// and read from any thread (the watchdog's), so it is one atomic.
#pragma once

#include <cstdint>
#include <string>

namespace accelerate::detail {

/// Records the step (the Accelerator's step counter). Negative: not known.
void note_training_step(std::int64_t step) noexcept;

/// " at training step N", or "" when no step was noted. Safe on any thread.
[[nodiscard]] std::string at_training_step();

}  // namespace accelerate::detail
