#include "accelerate/runtime/logging.hpp"

#include <iostream>

namespace accelerate {

Logger::Logger(const State& state, std::string name, std::ostream* sink)
    : state_(state), name_(std::move(name)), sink_(sink != nullptr ? sink : &std::cerr), level_(state.log_level()) {}

void Logger::log(LogLevel level, std::string_view message, LogOptions options) const {
  if (options.main_process_only) {
    if (state_.is_main_process() && level >= level_) emit(level, message);
    return;
  }
  if (!options.in_order) {
    if (level >= level_) emit(level, message);
    return;
  }
  // In order: rank r writes in round r, and a barrier closes each round. The
  // barriers run even when the level filters the record, so all ranks make
  // the same number of them.
  for (int turn = 0; turn < state_.num_processes(); ++turn) {
    if (turn == state_.process_index() && level >= level_) emit(level, message);
    state_.wait_for_everyone();
  }
}

void Logger::emit(LogLevel level, std::string_view message) const {
  const std::string line =
      accelerate::format("[rank {}] {} {}: {}\n", state_.process_index(), to_string(level), name_, message);
  // One write per record keeps records from different threads whole.
  *sink_ << line << std::flush;
}

}  // namespace accelerate
