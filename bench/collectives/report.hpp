// Results of one run, the targets evaluated on them, and their
// output: plain-text tables, Markdown tables (for docs/performance.md) and
// JSON.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "collective.hpp"
#include "harness.hpp"
#include "system_info.hpp"

namespace bench {

/// One candidate at one (collective, size).
struct Row {
  Collective op = Collective::AllReduce;
  int64_t bytes = 0;
  std::string candidate;
  std::string what;
  bool diagnostic = false;
  Samples samples;
};

struct Run {
  int ranks = 1;
  std::string command;  ///< how the program was started (argv joined)
  SystemInfo system;
  std::vector<std::pair<std::string, std::string>> peers;  ///< name, description
  std::string gloo_missing;                                ///< why Gloo is absent, if it is
  Plan plan;
  std::vector<Row> rows;
  double wall_seconds = 0.0;
};

/// One of the targets at one (collective, size).
struct TargetCheck {
  std::string target;  ///< "bw >= 0.95 x MPI", "4 B overhead <= 1 us", "speed-up vs Gloo >= 10x"
  Collective op = Collective::AllReduce;
  int64_t bytes = 0;
  double value = 0.0;  ///< the measured ratio or difference
  double limit = 0.0;
  std::string unit;  ///< "x" or "us"
  bool met = false;
};

/// The targets of the issue that the run's rows allow evaluating (they are
/// stated for 2 ranks; at other counts they are informational).
std::vector<TargetCheck> evaluate_targets(const Run& run);

void print_text(std::ostream& out, const Run& run, const std::vector<TargetCheck>& targets);
void write_markdown(std::ostream& out, const Run& run, const std::vector<TargetCheck>& targets);
void write_json(std::ostream& out, const Run& run, const std::vector<TargetCheck>& targets);

}  // namespace bench
