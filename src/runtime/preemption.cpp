#include "accelerate/runtime/preemption.hpp"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

namespace accelerate {
namespace {

// Only lock-free atomics may be touched from a signal handler.
static_assert(std::atomic<int>::is_always_lock_free, "signal flag must be lock-free");
static_assert(std::atomic<bool>::is_always_lock_free, "watcher flag must be lock-free");

std::atomic<int> g_received{0};        // first watched signal delivered, 0 = none
std::atomic<bool> g_installed{false};  // a PreemptionWatcher is alive

void record_signal(int signal_number) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal_number);
}

struct NamedSignal {
  const char* name;  // without the SIG prefix
  int number;
};

constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"USR1", SIGUSR1},
    {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},   {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},
    {"CHLD", SIGCHLD}, {"CONT", SIGCONT},   {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},     {"SYS", SIGSYS},
};

// Signals that cannot be caught, or that report a fault of this process and
// must keep their default action (continuing after them is undefined).
bool forbidden(int signal_number) {
  switch (signal_number) {
    case SIGKILL:
    case SIGSTOP:
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGABRT:
    case SIGTRAP:
    case SIGSYS: return true;
    default: return false;
  }
}

void check_watchable(int signal_number, std::string_view source) {
  if (signal_number <= 0 || signal_number >= NSIG) {
    throw ConfigError(std::string(source) + ": " + std::to_string(signal_number) + " is not a signal number (1.." +
                      std::to_string(NSIG - 1) + "). Use e.g. USR1 or TERM.");
  }
  if (forbidden(signal_number)) {
    throw ConfigError(std::string(source) + ": " + signal_name(signal_number) +
                      " cannot be used to request a stop (it cannot be caught, or reports a fault of the "
                      "process). Use USR1, USR2, TERM, INT, HUP or XCPU.");
  }
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

int parse_one_signal(const std::string& entry, std::string_view source) {
  int number = 0;
  const auto [end, error] = std::from_chars(entry.data(), entry.data() + entry.size(), number);
  if (error == std::errc() && end == entry.data() + entry.size()) return number;
  std::string name = detail::ascii_upper(entry);
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (const NamedSignal& s : kSignals) {
    if (name == s.name) return s.number;
  }
  throw ConfigError(std::string(source) + ": unknown signal '" + entry +
                    "'. Give names such as USR1, SIGTERM or numbers, separated by commas.");
}

// Job ids go into a shell command: quote anything beyond the usual characters.
std::string shell_word(const std::string& word) {
  bool plain = !word.empty();
  for (char c : word) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') plain = false;
  }
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::vector<int> PreemptionWatcher::default_signals() { return {SIGUSR1, SIGTERM}; }

PreemptionWatcher::PreemptionWatcher() : PreemptionWatcher(default_signals()) {}

PreemptionWatcher::PreemptionWatcher(const std::vector<int>& signals) {
  if (signals.empty()) {
    throw ConfigError(
        "PreemptionWatcher: the list of signals is empty. Give at least one, "
        "e.g. PreemptionWatcher::default_signals().");
  }
  for (int s : signals) {
    check_watchable(s, "PreemptionWatcher");
    bool seen = false;
    for (int t : signals_) seen = seen || t == s;
    if (!seen) signals_.push_back(s);
  }
  if (g_installed.exchange(true)) {
    throw Error(
        "PreemptionWatcher: another watcher is already installed in this process. "
        "Signal handlers are process-wide: keep one watcher (the Accelerator owns one) and share it.");
  }
  g_received.store(0);

  struct sigaction action {};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  previous_.resize(signals_.size());
  for (std::size_t i = 0; i < signals_.size(); ++i) {
    if (sigaction(signals_[i], &action, &previous_[i]) != 0) {
      const int error = errno;
      for (std::size_t j = i; j-- > 0;) sigaction(signals_[j], &previous_[j], nullptr);
      g_installed.store(false);
      throw ConfigError("PreemptionWatcher: sigaction(" + signal_name(signals_[i]) +
                        ") failed: " + std::strerror(error) + ".");
    }
  }
}

PreemptionWatcher::~PreemptionWatcher() {
  for (std::size_t i = signals_.size(); i-- > 0;) sigaction(signals_[i], &previous_[i], nullptr);
  g_installed.store(false);
}

bool PreemptionWatcher::requested() const noexcept { return g_received.load() != 0; }

int PreemptionWatcher::signal_number() const noexcept { return g_received.load(); }

void PreemptionWatcher::reset() noexcept { g_received.store(0); }

std::vector<int> parse_signal_list(std::string_view text, std::string_view source) {
  std::vector<int> result;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t comma = text.find(',', begin);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string entry = trimmed(text.substr(begin, comma - begin));
    if (entry.empty()) {
      throw ConfigError(std::string(source) + ": empty entry in the signal list '" + std::string(text) +
                        "'. Write e.g. USR1,TERM.");
    }
    const int number = parse_one_signal(entry, source);
    check_watchable(number, source);
    bool seen = false;
    for (int s : result) seen = seen || s == number;
    if (!seen) result.push_back(number);
    begin = comma + 1;
  }
  return result;
}

std::string signal_name(int signal_number) {
  for (const NamedSignal& s : kSignals) {
    if (s.number == signal_number) return std::string("SIG") + s.name;
  }
  return "signal " + std::to_string(signal_number);
}

std::optional<std::string> requeue_command(const EnvironmentLookup& lookup) {
  auto nonempty = [&](const char* name) -> std::optional<std::string> {
    auto value = lookup(name);
    if (value && value->empty()) return std::nullopt;
    return value;
  };
  if (auto id = nonempty("SLURM_JOB_ID")) return "scontrol requeue " + shell_word(*id);
  if (auto id = nonempty("PBS_JOBID")) return "qrerun " + shell_word(*id);
  return std::nullopt;
}

std::optional<std::string> requeue_command() {
  return requeue_command([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace accelerate
