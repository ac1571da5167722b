#include "runtime/error_report.hpp"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "accelerate/error.hpp"
#include "accelerate/format.hpp"
#include "detail/blocking_call_watchdog.hpp"
#include "detail/host_name.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_runtime.hpp"
#include "detail/mpi_wait.hpp"
#include "detail/unique_comm.hpp"

// The library is built in unity batches: the helpers get a namespace of
// their own.
namespace accelerate::detail::error_report {
namespace {

using Clock = std::chrono::steady_clock;

// The communicator carries nothing but reports and acknowledgements.
constexpr int kReportTag = 1;
constexpr int kAckTag = 2;
// A message this long is printed by its own rank rather than sent.
constexpr std::size_t kMaxReportBytes = std::size_t{1} << 20;
// The waiting ranks may outnumber the cores: yield early.
constexpr unsigned kPollSpins = 64;

// Each State's error-report communicator; owner nullptr marks one kept past
// its State for abort_all. Leaked on purpose: abort_all may run during
// static destruction.
struct Registration {
  const void* owner = nullptr;
  MPI_Comm comm = MPI_COMM_NULL;
};
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<Registration>& registry() {
  static auto* list = new std::vector<Registration>;
  return *list;
}

std::optional<MPI_Comm> current_report_comm() {
  const std::lock_guard lock(registry_mutex());
  if (registry().empty()) return std::nullopt;
  return registry().back().comm;
}

// One received (or this rank's own) report.
struct Report {
  int rank = 0;  // in MPI_COMM_WORLD, as the "[rank r/n on host]" prefix
  int size = 1;
  std::string host;
  std::string text;  // normalised
};

std::string encode(const Report& report) {
  return std::to_string(report.rank) + '\n' + std::to_string(report.size) + '\n' + report.host + '\n' + report.text;
}

// A payload that does not parse is still shown, under the sender's rank in
// the report communicator.
Report decode(const std::string& payload, int source, int fallback_size) {
  Report report{source, fallback_size, "?", payload};
  const std::size_t first = payload.find('\n');
  const std::size_t second = first == std::string::npos ? first : payload.find('\n', first + 1);
  const std::size_t third = second == std::string::npos ? second : payload.find('\n', second + 1);
  if (third == std::string::npos) return report;
  try {
    report.rank = std::stoi(payload.substr(0, first));
    report.size = std::stoi(payload.substr(first + 1, second - first - 1));
  } catch (const std::exception&) {
    return Report{source, fallback_size, "?", payload};
  }
  report.host = payload.substr(second + 1, third - second - 1);
  report.text = payload.substr(third + 1);
  return report;
}

// "vm", "a,b", "a,b,c", or "a,b,… (64 hosts)".
std::string host_list(const std::vector<std::string>& hosts) {
  if (hosts.size() <= 3) {
    std::string joined;
    for (const auto& host : hosts) joined += (joined.empty() ? "" : ",") + host;
    return joined;
  }
  return hosts[0] + "," + hosts[1] + ",… (" + std::to_string(hosts.size()) + " hosts)";
}

// Prints each distinct text of `reports` once: its ranks and hosts in the
// prefix, which also stands in for the rank prefixes inside the text.
void print_grouped(std::vector<Report> reports) {
  std::stable_sort(reports.begin(), reports.end(), [](const Report& a, const Report& b) { return a.rank < b.rank; });
  struct Group {
    std::vector<int> ranks;
    std::vector<std::string> hosts;
    int size = 1;
  };
  std::vector<std::pair<std::string, Group>> groups;  // in the order of their lowest rank
  std::map<std::string, std::size_t> index;
  for (const Report& report : reports) {
    const auto [it, added] = index.try_emplace(report.text, groups.size());
    if (added) groups.emplace_back(report.text, Group{});
    Group& group = groups[it->second].second;
    group.ranks.push_back(report.rank);
    group.size = report.size;
    if (std::find(group.hosts.begin(), group.hosts.end(), report.host) == group.hosts.end()) {
      group.hosts.push_back(report.host);
    }
  }
  std::string out;
  for (const auto& [text, group] : groups) {
    const std::string prefix =
        group.ranks.size() == 1
            ? accelerate::format("[rank {}/{} on {}]", group.ranks.front(), group.size, group.hosts.front())
            : accelerate::format("[ranks {}/{} on {}]", format_rank_list(group.ranks), group.size,
                                 host_list(group.hosts));
    out += prefix + " aborting the job: ";
    for (const char c : text) {
      if (c == kRankMark) {
        out += prefix;
      } else {
        out += c;
      }
    }
    out += '\n';
  }
  // One write: the report must not interleave with other output.
  std::cerr << out << std::flush;
}

// World ranks of `comm` ranks (the prefix numbers ranks in MPI_COMM_WORLD).
std::vector<int> world_ranks(MPI_Comm comm, const std::vector<int>& ranks) {
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world = MPI_GROUP_NULL;
  ACCELERATE_MPI_CHECK(MPI_Comm_group(comm, &group));
  ACCELERATE_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> translated(ranks.size(), MPI_UNDEFINED);
  const int code =
      MPI_Group_translate_ranks(group, static_cast<int>(ranks.size()), ranks.data(), world, translated.data());
  const int freed_group = MPI_Group_free(&group);
  const int freed_world = MPI_Group_free(&world);
  ACCELERATE_MPI_CHECK(code);
  ACCELERATE_MPI_CHECK(freed_group);
  ACCELERATE_MPI_CHECK(freed_world);
  return translated;
}

// Rank 0's side: collect, print, acknowledge. Returns true (its own message
// is printed).
class Collector {
 public:
  Collector(MPI_Comm comm, int size, Report own) : comm_(comm), size_(size), reported_(static_cast<std::size_t>(size)) {
    reported_[0] = true;
    reports_.push_back(std::move(own));
  }

  // A receive still in flight keeps its memory: MPI may write into it until
  // the abort ends the process.
  ~Collector() {
    for (auto& pending : pending_) (void)pending.release();
  }
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  bool run(Clock::time_point start) {
    try {
      PollBackoff backoff(kPollSpins);
      while (received() < size_ && Clock::now() < start + kErrorCollectWindow) {
        poll();
        backoff.pause();
      }
    } catch (const std::exception&) {
      // An MPI error while collecting: print what arrived.
    }
    print_grouped(reports_);
    try {
      print_missing(Clock::now() - start);
    } catch (const std::exception&) {
      // Only the line naming the silent ranks is lost.
    }
    try {
      acknowledge_new();
      // Wait until the acknowledgements are received (MPI_Issend), so that
      // this rank's abort does not overtake them; late reports are printed
      // and acknowledged meanwhile.
      PollBackoff backoff(kPollSpins);
      while (Clock::now() < start + kErrorReportWindow) {
        const std::size_t before = reports_.size();
        poll();
        if (reports_.size() > before) {
          print_grouped(std::vector<Report>(reports_.begin() + static_cast<std::ptrdiff_t>(before), reports_.end()));
          acknowledge_new();
        }
        if (pending_.empty() && acks_done()) break;
        backoff.pause();
      }
    } catch (const std::exception&) {
      // The report is printed; a rank left without its acknowledgement
      // prints its own message.
    }
    return true;
  }

 private:
  struct Pending {
    int source = 0;
    std::string buffer;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  [[nodiscard]] int received() const { return static_cast<int>(reports_.size()); }

  void poll() {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      ACCELERATE_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, comm_, &flag, &status));
      if (flag == 0) break;
      int count = 0;
      ACCELERATE_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &count));
      auto pending = std::make_unique<Pending>();
      pending->source = status.MPI_SOURCE;
      pending->buffer.resize(static_cast<std::size_t>(std::max(count, 0)));
      // Each rank sends one report: this receive matches the probed message.
      ACCELERATE_MPI_CHECK(
          MPI_Irecv(pending->buffer.data(), count, MPI_CHAR, pending->source, kReportTag, comm_, &pending->request));
      pending_.push_back(std::move(pending));
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      ACCELERATE_MPI_CHECK(MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE));
      if (done == 0) {
        ++it;
        continue;
      }
      const int source = (*it)->source;
      if (source > 0 && source < size_ && !reported_[static_cast<std::size_t>(source)]) {
        reported_[static_cast<std::size_t>(source)] = true;
        reports_.push_back(decode((*it)->buffer, source, size_));
        unacknowledged_.push_back(source);
      }
      it = pending_.erase(it);
    }
  }

  void acknowledge_new() {
    static const int kAck = 1;
    for (const int source : unacknowledged_) {
      MPI_Request request = MPI_REQUEST_NULL;
      ACCELERATE_MPI_CHECK(MPI_Issend(&kAck, 1, MPI_INT, source, kAckTag, comm_, &request));
      acks_.push_back(request);
    }
    unacknowledged_.clear();
  }

  bool acks_done() {
    int done = 0;
    ACCELERATE_MPI_CHECK(MPI_Testall(static_cast<int>(acks_.size()), acks_.data(), &done, MPI_STATUSES_IGNORE));
    return done != 0;
  }

  void print_missing(Clock::duration waited) {
    if (received() == size_) return;
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!reported_[static_cast<std::size_t>(r)]) missing.push_back(r);
    }
    std::vector<int> in_world = world_ranks(comm_, missing);
    const auto seconds = std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() / 1000.0;
    const std::string line = accelerate::format(
        "{} error report: {} {} sent no report within {:.1f} s (healthy and waiting in a collective, stopped, or "
        "dead); the abort ends {} too.\n",
        where(), missing.size() == 1 ? "rank" : "ranks", format_rank_list(in_world), seconds,
        missing.size() == 1 ? "it" : "them");
    std::cerr << line << std::flush;
  }

  MPI_Comm comm_;
  int size_;
  std::vector<bool> reported_;
  std::vector<Report> reports_;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<int> unacknowledged_;
  std::vector<MPI_Request> acks_;
};

// A non-zero rank's side: send, then wait for rank 0's acknowledgement.
bool send_and_wait(MPI_Comm comm, const Report& own, Clock::time_point start) {
  // Both buffers outlive this call: without an acknowledgement the requests
  // stay in flight until the abort ends the process.
  auto* payload = new std::string(encode(own));
  if (payload->size() > kMaxReportBytes) return false;
  static int ack = 0;
  MPI_Request ack_request = MPI_REQUEST_NULL;
  MPI_Request send_request = MPI_REQUEST_NULL;
  // The receive first, so that rank 0's synchronous acknowledgement matches
  // the moment it arrives.
  ACCELERATE_MPI_CHECK(MPI_Irecv(&ack, 1, MPI_INT, 0, kAckTag, comm, &ack_request));
  ACCELERATE_MPI_CHECK(
      MPI_Isend(payload->data(), static_cast<int>(payload->size()), MPI_CHAR, 0, kReportTag, comm, &send_request));
  PollBackoff backoff(kPollSpins);
  int sent = 0;
  for (;;) {
    if (sent == 0) ACCELERATE_MPI_CHECK(MPI_Test(&send_request, &sent, MPI_STATUS_IGNORE));
    int acknowledged = 0;
    ACCELERATE_MPI_CHECK(MPI_Test(&ack_request, &acknowledged, MPI_STATUS_IGNORE));
    if (acknowledged != 0) return true;
    if (Clock::now() >= start + kErrorReportWindow) return false;
    backoff.pause();
  }
}

}  // namespace
}  // namespace accelerate::detail::error_report

namespace accelerate::detail {

void open_error_report(const void* owner, MPI_Comm comm) {
  UniqueComm dup = duplicate_comm(comm);
  std::vector<UniqueComm> left_behind;  // freed after the lock is released
  const std::lock_guard lock(error_report::registry_mutex());
  auto& list = error_report::registry();
  for (auto it = list.begin(); it != list.end();) {
    if (it->owner == nullptr) {
      left_behind.emplace_back(it->comm);
      it = list.erase(it);
    } else {
      ++it;
    }
  }
  list.push_back({owner, dup.get()});
  (void)dup.release();
}

void close_error_report(const void* owner) noexcept {
  MPI_Comm comm = MPI_COMM_NULL;
  try {
    const std::lock_guard lock(error_report::registry_mutex());
    auto& list = error_report::registry();
    const auto it = std::find_if(list.rbegin(), list.rend(),
                                 [owner](const error_report::Registration& entry) { return entry.owner == owner; });
    if (it == list.rend()) return;
    comm = it->comm;
    list.erase(std::next(it).base());
  } catch (...) {
    return;  // the lock failed: the communicator stays, registered
  }
  const UniqueComm freed(comm);  // reports a failed free on stderr
}

void keep_error_report(const void* owner) noexcept {
  try {
    const std::lock_guard lock(error_report::registry_mutex());
    for (auto& entry : error_report::registry()) {
      if (entry.owner == owner) entry.owner = nullptr;
    }
  } catch (...) {
  }
}

std::string normalise_error_message(std::string_view message, int rank, int size) {
  const std::string head = "[rank " + std::to_string(rank) + "/" + std::to_string(size);
  std::string out;
  out.reserve(message.size());
  std::size_t at = 0;
  while (at < message.size()) {
    const std::size_t found = message.find(head, at);
    if (found == std::string_view::npos) break;
    const std::size_t end = found + head.size();  // "]" or " on <host>]" must follow
    std::optional<std::size_t> close;
    if (end < message.size() && message[end] == ']') {
      close = end;
    } else if (message.substr(end, 4) == " on ") {
      const std::size_t bracket = message.find_first_of("]\n[", end + 4);
      if (bracket != std::string_view::npos && message[bracket] == ']' && bracket > end + 4) close = bracket;
    }
    if (!close) {  // "[rank 1/20" when this is rank 1/2, or no closing bracket: not our prefix
      out.append(message.substr(at, end - at));
      at = end;
      continue;
    }
    out.append(message.substr(at, found - at));
    out += kRankMark;
    at = *close + 1;
  }
  out.append(message.substr(std::min(at, message.size())));
  return out;
}

std::string format_rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

bool report_error_once(std::string_view message) noexcept {
  try {
    // After a collective timed out, a peer is known to be missing and the
    // ranks reach their aborts at different moments: a short report, then
    // the abort (the windows are counted from `start`).
    const error_report::Clock::time_point start =
        error_report::Clock::now() -
        (any_abandoned() ? kErrorReportWindow - kErrorReportWindowAfterTimeout : std::chrono::milliseconds(0));
    if (!mpi_is_running()) return false;
    const std::optional<MPI_Comm> comm = error_report::current_report_comm();
    if (!comm) return false;  // no State ever registered one: nothing to gather over
    // Under MPI_THREAD_FUNNELED and below only the main thread may call MPI.
    int is_main = 0;
    ACCELERATE_MPI_CHECK(MPI_Is_thread_main(&is_main));
    if (is_main == 0) {
      int level = MPI_THREAD_SINGLE;
      ACCELERATE_MPI_CHECK(MPI_Query_thread(&level));
      if (level < MPI_THREAD_MULTIPLE) return false;
    }
    int rank = 0;
    int size = 1;
    ACCELERATE_MPI_CHECK(MPI_Comm_rank(*comm, &rank));
    ACCELERATE_MPI_CHECK(MPI_Comm_size(*comm, &size));
    const auto position = world_position();
    if (size <= 1 || !position) return false;
    const error_report::Report own{position->rank, position->size, short_hostname(),
                                   normalise_error_message(message, position->rank, position->size)};
    // Every call below returns at once; should a broken MPI block in one
    // anyway, the watchdog still prints the message before it ends the
    // process.
    const BlockingCallWatchdog watchdog("an MPI call of the error report (aborting the job: " + std::string(message) +
                                            ")",
                                        kErrorReportWindow + std::chrono::seconds(1));
    if (rank == 0) return error_report::Collector(*comm, size, own).run(start);
    return error_report::send_and_wait(*comm, own, start);
  } catch (...) {
    return false;
  }
}

}  // namespace accelerate::detail
