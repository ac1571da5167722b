#include "report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <set>

namespace bench {
namespace {

constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * KiB;

const Row* find_row(const Run& run, Collective op, int64_t bytes, const std::string& candidate) {
  for (const Row& row : run.rows) {
    if (row.op == op && row.bytes == bytes && row.candidate == candidate) return &row;
  }
  return nullptr;
}

std::vector<Collective> ops_of(const Run& run) {
  std::vector<Collective> ops;
  for (const Row& row : run.rows) {
    if (std::find(ops.begin(), ops.end(), row.op) == ops.end()) ops.push_back(row.op);
  }
  return ops;
}

std::vector<int64_t> sizes_of(const Run& run, Collective op) {
  std::vector<int64_t> sizes;
  for (const Row& row : run.rows) {
    if (row.op == op && std::find(sizes.begin(), sizes.end(), row.bytes) == sizes.end()) sizes.push_back(row.bytes);
  }
  return sizes;
}

std::vector<std::string> candidates_of(const Run& run, Collective op) {
  std::vector<std::string> names;
  for (const Row& row : run.rows) {
    if (row.op == op && std::find(names.begin(), names.end(), row.candidate) == names.end()) {
      names.push_back(row.candidate);
    }
  }
  return names;
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), pattern, value);
  return text;
}

std::string microseconds(double seconds) {
  const double us = seconds * 1e6;
  if (us < 10.0) return format("%.2f", us);
  if (us < 1000.0) return format("%.1f", us);
  return format("%.0f", us);
}

std::string gigabytes(double gbps) {
  if (gbps < 0.01) return format("%.4f", gbps);
  if (gbps < 1.0) return format("%.3f", gbps);
  return format("%.2f", gbps);
}

std::string signed_microseconds(double seconds) {
  const double us = seconds * 1e6;
  if (std::fabs(us) < 10.0) return format("%+.2f", us);
  if (std::fabs(us) < 1000.0) return format("%+.1f", us);
  return format("%+.0f", us);
}

std::string ratio(double value) { return value >= 10.0 ? format("%.0f", value) : format("%.2f", value); }

std::string pad(const std::string& text, std::size_t width, bool left = false) {
  if (text.size() >= width) return text;
  const std::string spaces(width - text.size(), ' ');
  return left ? text + spaces : spaces + text;
}

// Half the interquartile range, relative to the median: the run-to-run noise.
std::string spread(const Samples& samples) {
  const double median = samples.median();
  if (median <= 0.0) return "";
  return format("%.0f%%", 50.0 * (samples.quantile(0.75) - samples.quantile(0.25)) / median);
}

const char* op_note(Collective op) {
  switch (op) {
    case Collective::AllReduce: return "float32 sum, in place";
    case Collective::Broadcast: return "float32, root 0, in place";
    case Collective::AllGather: return "float32, size = per-rank input, output = n x size";
  }
  return "";
}

// The memory-bound floor of a node-local all-reduce: every byte of every
// rank's buffer read and written once, all ranks at once (memory_peer.cpp).
double floor_seconds(const Row& copy) { return copy.samples.median(); }

// The comparison the issue asks for: a table per collective.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Table main_table(const Run& run, Collective op) {
  Table table;
  const std::vector<std::string> peers = {"accelerate", "mpi", "gloo"};
  std::vector<std::string> present;
  for (const auto& peer : peers) {
    for (const int64_t bytes : sizes_of(run, op)) {
      if (find_row(run, op, bytes, peer) != nullptr) {
        present.push_back(peer);
        break;
      }
    }
  }
  table.header.push_back("size");
  for (const auto& peer : present) {
    table.header.push_back(peer + " us");
    table.header.push_back("algbw");
    table.header.push_back("busbw");
  }
  const bool have_mpi = std::find(present.begin(), present.end(), "mpi") != present.end();
  const bool have_gloo = std::find(present.begin(), present.end(), "gloo") != present.end();
  if (have_mpi) table.header.push_back("bw vs MPI");
  if (have_mpi) table.header.push_back("+us vs MPI");
  if (have_gloo) table.header.push_back("x Gloo");
  bool have_floor = false;
  for (const int64_t bytes : sizes_of(run, op)) have_floor = have_floor || find_row(run, op, bytes, "copy") != nullptr;
  if (have_floor) table.header.push_back("of floor");
  for (const int64_t bytes : sizes_of(run, op)) {
    std::vector<std::string> cells{format_bytes(bytes)};
    for (const auto& peer : present) {
      const Row* row = find_row(run, op, bytes, peer);
      if (row == nullptr) {
        cells.insert(cells.end(), {"-", "-", "-"});
        continue;
      }
      const double t = row->samples.median();
      cells.push_back(microseconds(t));
      cells.push_back(gigabytes(algbw_gbps(op, bytes, run.ranks, t)));
      cells.push_back(gigabytes(busbw_gbps(op, bytes, run.ranks, t)));
    }
    const Row* ours = find_row(run, op, bytes, "accelerate");
    const Row* mpi = find_row(run, op, bytes, "mpi");
    const Row* gloo = find_row(run, op, bytes, "gloo");
    if (have_mpi) {
      cells.push_back(ours && mpi ? ratio(mpi->samples.median() / ours->samples.median()) : "-");
      cells.push_back(ours && mpi ? signed_microseconds(ours->samples.median() - mpi->samples.median()) : "-");
    }
    if (have_gloo) cells.push_back(ours && gloo ? ratio(gloo->samples.median() / ours->samples.median()) : "-");
    if (have_floor) {
      const Row* copy = find_row(run, op, bytes, "copy");
      cells.push_back(ours && copy ? ratio(floor_seconds(*copy) / ours->samples.median()) : "-");
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

// Every candidate, diagnostics included: median µs and its noise.
Table detail_table(const Run& run, Collective op) {
  Table table;
  const auto names = candidates_of(run, op);
  table.header.push_back("size");
  for (const auto& name : names) table.header.push_back(name + " us");
  for (const int64_t bytes : sizes_of(run, op)) {
    std::vector<std::string> cells{format_bytes(bytes)};
    for (const auto& name : names) {
      const Row* row = find_row(run, op, bytes, name);
      cells.push_back(row != nullptr ? microseconds(row->samples.median()) + " ±" + spread(row->samples) : "-");
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

// Side effects per candidate: fresh pages touched per call, and how often
// another process took the core during a batch (the machine's noise).
Table counter_table(const Run& run, Collective op) {
  Table table;
  const auto names = candidates_of(run, op);
  table.header.push_back("size");
  for (const auto& name : names) table.header.push_back(name);
  for (const int64_t bytes : sizes_of(run, op)) {
    std::vector<std::string> cells{format_bytes(bytes)};
    for (const auto& name : names) {
      const Row* row = find_row(run, op, bytes, name);
      cells.push_back(row != nullptr ? format("%.1f", row->samples.page_faults_per_call) + " / " +
                                           format("%.1f", row->samples.preemptions_per_batch)
                                     : "-");
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

std::vector<std::size_t> widths(const Table& table) {
  std::vector<std::size_t> width(table.header.size(), 0);
  for (std::size_t c = 0; c < table.header.size(); ++c) width[c] = table.header[c].size();
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      // "±" is two bytes but one column.
      const std::size_t shown = row[c].size() - (row[c].find("\xC2\xB1") != std::string::npos ? 1 : 0);
      width[c] = std::max(width[c], shown);
    }
  }
  return width;
}

std::string cell(const std::string& text, std::size_t width) {
  const std::size_t extra = text.find("\xC2\xB1") != std::string::npos ? 1 : 0;
  return pad(text, width + extra);
}

void print_table_text(std::ostream& out, const Table& table) {
  const auto width = widths(table);
  for (std::size_t c = 0; c < table.header.size(); ++c) out << "  " << pad(table.header[c], width[c]);
  out << '\n';
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out << "  " << cell(row[c], width[c]);
    out << '\n';
  }
}

void print_table_markdown(std::ostream& out, const Table& table) {
  out << '|';
  for (const auto& name : table.header) {
    // "accelerate us" -> "accelerate µs"; "+us vs MPI" -> "+µs vs MPI"
    std::string shown = name;
    const auto at = shown.find("us");
    if (at != std::string::npos && (at == 0 || std::isalpha(static_cast<unsigned char>(shown[at - 1])) == 0)) {
      shown.replace(at, 2, "µs");
    }
    out << ' ' << shown << " |";
  }
  out << "\n|";
  for (std::size_t c = 0; c < table.header.size(); ++c) out << (c == 0 ? "---|" : "---:|");
  out << '\n';
  for (const auto& row : table.rows) {
    out << '|';
    for (const auto& text : row) out << ' ' << text << " |";
    out << '\n';
  }
}

std::string target_line(const TargetCheck& check) {
  std::string line = std::string(check.met ? "MET    " : "NOT MET") + "  " + std::string(to_string(check.op)) + " " +
                     pad(format_bytes(check.bytes), 7) + "  " + check.target + ": ";
  if (check.unit == "us") {
    line += format("%+.3f us", check.value) + " (limit " + format("%+.2f us", check.limit) + ")";
  } else {
    line += format(check.value >= 100.0 ? "%.0f" : (check.value >= 10.0 ? "%.1f" : "%.3f"), check.value) + "x (limit " +
            format("%.2f", check.limit) + "x)";
  }
  return line;
}

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': quoted += "\\\""; break;
      case '\\': quoted += "\\\\"; break;
      case '\n': quoted += "\\n"; break;
      case '\t': quoted += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          quoted += escaped;
        } else {
          quoted += c;
        }
    }
  }
  return quoted + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

const char* kConventions =
    "Time: for each repetition, the slowest rank's elapsed time over a batch of back-to-back calls divided by the "
    "batch's iterations; the table shows the median over repetitions. Candidates are interleaved within each "
    "repetition. algbw = bytes moved by the collective / time (all_reduce, broadcast: size; all_gather: "
    "n x size); busbw = algbw x 2(n-1)/n (all_reduce), x 1 (broadcast), x (n-1)/n (all_gather), as in nccl-tests. "
    "GB/s = 1e9 B/s. 'bw vs MPI' = MPI time / our time (= our busbw / MPI busbw); '+us vs MPI' = our time - MPI "
    "time; 'x Gloo' = Gloo time / our time; 'of floor' = the copy's time / our time (the memory-bound floor of an "
    "in-place all-reduce: every rank reads and writes its whole buffer once, all at once).";

}  // namespace

std::vector<TargetCheck> evaluate_targets(const Run& run) {
  std::vector<TargetCheck> checks;
  const auto add = [&checks](std::string target, Collective op, int64_t bytes, double value, double limit,
                             const char* unit) {
    const bool met = std::string(unit) == "us" ? value <= limit : value >= limit;
    checks.push_back({std::move(target), op, bytes, value, limit, unit, met});
  };
  for (const Collective op : ops_of(run)) {
    for (const int64_t bytes : sizes_of(run, op)) {
      const Row* ours = find_row(run, op, bytes, "accelerate");
      if (ours == nullptr) continue;
      const double t = ours->samples.median();
      const Row* mpi = find_row(run, op, bytes, "mpi");
      const Row* copy = find_row(run, op, bytes, "copy");
      if (op == Collective::AllReduce && run.ranks == 2) {
        // The all-reduce targets: past raw MPI from 1 MiB, near the memory
        // floor, and no slower than raw for small messages.
        const bool large = bytes >= MiB && bytes <= 64 * MiB;
        if (mpi != nullptr && large) add("busbw >= 1.5 x raw MPI", op, bytes, mpi->samples.median() / t, 1.5, "x");
        if (copy != nullptr && large) add("busbw >= 0.8 x memory floor", op, bytes, floor_seconds(*copy) / t, 0.8, "x");
        if (mpi != nullptr && bytes <= 4 * KiB) {
          add("extra cost over raw MPI <= 1 us", op, bytes, 1e6 * (t - mpi->samples.median()), 1.0, "us");
        }
        if (mpi != nullptr && !large && bytes > 4 * KiB) {
          add("busbw >= 1.0 x raw MPI", op, bytes, mpi->samples.median() / t, 1.0, "x");
        }
      } else if (op == Collective::AllReduce && mpi != nullptr) {
        add("never below raw MPI", op, bytes, mpi->samples.median() / t, 1.0, "x");
      } else if (mpi != nullptr) {
        if (bytes >= 64 * KiB) add("busbw >= 0.95 x raw MPI", op, bytes, mpi->samples.median() / t, 0.95, "x");
        if (bytes == 4) add("extra cost over raw MPI <= 1 us", op, bytes, 1e6 * (t - mpi->samples.median()), 1.0, "us");
      }
      if (const Row* gloo = find_row(run, op, bytes, "gloo")) {
        add("speed-up over c10d Gloo", op, bytes, gloo->samples.median() / t, bytes <= MiB ? 10.0 : 1.5, "x");
      }
    }
  }
  return checks;
}

void print_text(std::ostream& out, const Run& run, const std::vector<TargetCheck>& targets) {
  out << "== bench/collectives: " << run.ranks << " ranks ==\n";
  for (const auto& [key, value] : run.system.entries) out << "  " << pad(key, 26, true) << ' ' << value << '\n';
  for (const auto& [name, description] : run.peers)
    out << "  " << pad("peer " + name, 26, true) << ' ' << description << '\n';
  if (!run.gloo_missing.empty()) out << "  " << pad("peer gloo", 26, true) << " ABSENT: " << run.gloo_missing << '\n';
  out << "  " << pad("plan", 26, true) << ' ' << run.plan.repetitions << " repetitions ("
      << std::min(run.plan.repetitions, run.plan.slow_repetitions) << " when one call outlasts a batch), batches of ~"
      << run.plan.batch_seconds * 1e3 << " ms (" << run.plan.min_iterations << ".." << run.plan.max_iterations
      << " calls)\n";
  out << "  " << kConventions << "\n";
  for (const Collective op : ops_of(run)) {
    out << '\n'
        << to_string(op) << " (" << op_note(op) << "), " << run.ranks << " ranks, busbw = algbw x "
        << bus_factor_text(op, run.ranks) << ", times in us, bandwidths in GB/s, medians\n";
    print_table_text(out, main_table(run, op));
    out << "  every candidate (median us ± half the interquartile range):\n";
    print_table_text(out, detail_table(run, op));
    out << "  minor page faults per call / involuntary context switches per batch (max over ranks):\n";
    print_table_text(out, counter_table(run, op));
  }
  out << "\nTargets (all_reduce: 2 ranks >= 1.5x raw MPI and >= 0.8x the memory floor from 1 MiB to 64 MiB, "
         "+1 us at <= 4 KiB; other rank counts never below raw. broadcast, all_gather: 0.95x raw from 64 KiB)\n";
  for (const auto& check : targets) out << "  " << target_line(check) << '\n';
  out << "\nwall time " << format("%.1f", run.wall_seconds) << " s\n";
}

void write_markdown(std::ostream& out, const Run& run, const std::vector<TargetCheck>& targets) {
  out << "#### " << run.ranks << " ranks ";
  if (run.system.oversubscribed) {
    out << "(oversubscribed: " << run.system.ranks_on_host << " ranks on " << run.system.cores_online << " cores)\n\n";
  } else {
    out << "(one rank per core)\n\n";
  }
  for (const Collective op : ops_of(run)) {
    out << "**" << to_string(op) << "** (" << op_note(op) << "; busbw = algbw × " << bus_factor_text(op, run.ranks)
        << "; µs and GB/s, medians of " << run.plan.repetitions << " repetitions, "
        << std::min(run.plan.repetitions, run.plan.slow_repetitions)
        << " at sizes where one call outlasts a batch)\n\n";
    print_table_markdown(out, main_table(run, op));
    out << '\n';
  }
  out << "<details><summary>Every candidate, " << run.ranks
      << " ranks (median µs ± half the interquartile range)</summary>\n\n";
  for (const Collective op : ops_of(run)) {
    out << "**" << to_string(op) << "**\n\n";
    print_table_markdown(out, detail_table(run, op));
    out << "\nMinor page faults per call / involuntary context switches per batch (max over ranks):\n\n";
    print_table_markdown(out, counter_table(run, op));
    out << '\n';
  }
  out << "</details>\n\n";
  out << "Targets:\n\n";
  for (const auto& check : targets) out << "- " << target_line(check) << '\n';
  out << '\n';
}

void write_json(std::ostream& out, const Run& run, const std::vector<TargetCheck>& targets) {
  out << "{\n  \"benchmark\": \"collectives\",\n";
  out << "  \"ranks\": " << run.ranks << ",\n";
  out << "  \"oversubscribed\": " << (run.system.oversubscribed ? "true" : "false") << ",\n";
  out << "  \"command\": " << json_string(run.command) << ",\n";
  out << "  \"conventions\": " << json_string(kConventions) << ",\n";
  out << "  \"system\": {";
  for (std::size_t i = 0; i < run.system.entries.size(); ++i) {
    out << (i ? ",\n" : "\n") << "    " << json_string(run.system.entries[i].first) << ": "
        << json_string(run.system.entries[i].second);
  }
  out << "\n  },\n  \"peers\": {";
  for (std::size_t i = 0; i < run.peers.size(); ++i) {
    out << (i ? ",\n" : "\n") << "    " << json_string(run.peers[i].first) << ": " << json_string(run.peers[i].second);
  }
  out << "\n  },\n";
  out << "  \"gloo_missing\": " << (run.gloo_missing.empty() ? "null" : json_string(run.gloo_missing)) << ",\n";
  out << "  \"plan\": {\"repetitions\": " << run.plan.repetitions
      << ", \"slow_repetitions\": " << run.plan.slow_repetitions
      << ", \"batch_seconds\": " << json_number(run.plan.batch_seconds)
      << ", \"min_iterations\": " << run.plan.min_iterations << ", \"max_iterations\": " << run.plan.max_iterations
      << "},\n";
  out << "  \"results\": [";
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    const Row& row = run.rows[i];
    const double t = row.samples.median();
    out << (i ? ",\n" : "\n") << "    {\"op\": " << json_string(std::string(to_string(row.op)))
        << ", \"bytes\": " << row.bytes << ", \"candidate\": " << json_string(row.candidate)
        << ", \"call\": " << json_string(row.what) << ", \"diagnostic\": " << (row.diagnostic ? "true" : "false")
        << ", \"iterations\": " << row.samples.iterations << ", \"median_us\": " << json_number(t * 1e6)
        << ", \"p25_us\": " << json_number(row.samples.quantile(0.25) * 1e6)
        << ", \"p75_us\": " << json_number(row.samples.quantile(0.75) * 1e6)
        << ", \"min_us\": " << json_number(row.samples.min() * 1e6)
        << ", \"page_faults_per_call\": " << json_number(row.samples.page_faults_per_call)
        << ", \"preemptions_per_batch\": " << json_number(row.samples.preemptions_per_batch)
        << ", \"algbw_GBps\": " << json_number(algbw_gbps(row.op, row.bytes, run.ranks, t))
        << ", \"busbw_GBps\": " << json_number(busbw_gbps(row.op, row.bytes, run.ranks, t)) << ", \"samples_us\": [";
    for (std::size_t s = 0; s < row.samples.seconds.size(); ++s) {
      out << (s ? ", " : "") << json_number(row.samples.seconds[s] * 1e6);
    }
    out << "]}";
  }
  out << "\n  ],\n  \"targets\": [";
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& check = targets[i];
    out << (i ? ",\n" : "\n") << "    {\"target\": " << json_string(check.target)
        << ", \"op\": " << json_string(std::string(to_string(check.op))) << ", \"bytes\": " << check.bytes
        << ", \"value\": " << json_number(check.value) << ", \"limit\": " << json_number(check.limit)
        << ", \"unit\": " << json_string(check.unit)
        << ", \"stated_by_issue\": " << (check.op == Collective::AllReduce && run.ranks == 2 ? "true" : "false")
        << ", \"met\": " << (check.met ? "true" : "false") << "}";
  }
  out << "\n  ],\n  \"wall_seconds\": " << json_number(run.wall_seconds) << "\n}\n";
}

}  // namespace bench
