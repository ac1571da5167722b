// PreemptionWatcher: real signals (raise, kill from another thread) set the
// flag; previous handlers come back; signals not watched keep their handlers;
// a second watcher, bad signal lists and uncatchable signals are refused
// without touching any handler. Plus the requeue command per scheduler.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "accelerate/error.hpp"
#include "accelerate/runtime/preemption.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::PreemptionWatcher;

std::atomic<int> g_custom_calls{0};
void custom_handler(int) { g_custom_calls.fetch_add(1); }

// Installs `handler` for `signal_number` for the test's scope, then restores
// whatever was there (so a failing test does not leave handlers behind).
class ScopedHandler {
 public:
  ScopedHandler(int signal_number, void (*handler)(int)) : signal_(signal_number) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    EXPECT_EQ(sigaction(signal_, &action, &saved_), 0);
  }
  ~ScopedHandler() { sigaction(signal_, &saved_, nullptr); }
  ScopedHandler(const ScopedHandler&) = delete;
  ScopedHandler& operator=(const ScopedHandler&) = delete;

 private:
  int signal_;
  struct sigaction saved_ {};
};

void (*current_handler(int signal_number))(int) {
  struct sigaction now {};
  sigaction(signal_number, nullptr, &now);
  return now.sa_handler;
}

TEST(PreemptionWatcher, DefaultsAreUsr1AndTerm) {
  EXPECT_EQ(PreemptionWatcher::default_signals(), (std::vector<int>{SIGUSR1, SIGTERM}));
  PreemptionWatcher watcher;
  EXPECT_EQ(watcher.signals(), PreemptionWatcher::default_signals());
  EXPECT_FALSE(watcher.requested());
  EXPECT_EQ(watcher.signal_number(), 0);
}

TEST(PreemptionWatcher, RaisedUsr1SetsTheFlagAndFirstSignalWins) {
  PreemptionWatcher watcher;
  ASSERT_EQ(raise(SIGUSR1), 0);
  EXPECT_TRUE(watcher.requested());
  EXPECT_EQ(watcher.signal_number(), SIGUSR1);
  // SIGTERM is caught too (the process survives) but the first reason is kept.
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(watcher.signal_number(), SIGUSR1);
  watcher.reset();
  EXPECT_FALSE(watcher.requested());
  EXPECT_EQ(watcher.signal_number(), 0);
}

TEST(PreemptionWatcher, RaisedTermSetsTheFlag) {
  PreemptionWatcher watcher;
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_TRUE(watcher.requested());
  EXPECT_EQ(watcher.signal_number(), SIGTERM);
}

TEST(PreemptionWatcher, NewWatcherStartsClear) {
  {
    PreemptionWatcher first;
    ASSERT_EQ(raise(SIGUSR1), 0);
    ASSERT_TRUE(first.requested());
  }
  PreemptionWatcher second;
  EXPECT_FALSE(second.requested());
}

TEST(PreemptionWatcher, SignalFromAnotherThreadIsSeenByThePollingLoop) {
  PreemptionWatcher watcher;
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kill(getpid(), SIGUSR1);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!watcher.requested() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  sender.join();
  EXPECT_TRUE(watcher.requested());
  EXPECT_EQ(watcher.signal_number(), SIGUSR1);
}

TEST(PreemptionWatcher, InstallsWithSaRestart) {
  PreemptionWatcher watcher;
  for (int s : {SIGUSR1, SIGTERM}) {
    struct sigaction now {};
    ASSERT_EQ(sigaction(s, nullptr, &now), 0);
    EXPECT_NE(now.sa_flags & SA_RESTART, 0) << s;
    EXPECT_NE(now.sa_handler, SIG_DFL) << s;
  }
}

TEST(PreemptionWatcher, RestoresPreviousHandlersOnDestruction) {
  ScopedHandler usr1(SIGUSR1, custom_handler);
  ScopedHandler term(SIGTERM, SIG_IGN);
  g_custom_calls = 0;
  {
    PreemptionWatcher watcher;
    EXPECT_NE(current_handler(SIGUSR1), &custom_handler);
    ASSERT_EQ(raise(SIGUSR1), 0);
    EXPECT_TRUE(watcher.requested());
    EXPECT_EQ(g_custom_calls.load(), 0) << "the watcher must replace, not chain, the previous handler";
  }
  EXPECT_EQ(current_handler(SIGUSR1), &custom_handler);
  EXPECT_EQ(current_handler(SIGTERM), SIG_IGN);
  ASSERT_EQ(raise(SIGUSR1), 0);
  EXPECT_EQ(g_custom_calls.load(), 1);
}

TEST(PreemptionWatcher, RestoresTheDefaultAction) {
  ScopedHandler usr1(SIGUSR1, SIG_DFL);
  { PreemptionWatcher watcher; }
  EXPECT_EQ(current_handler(SIGUSR1), SIG_DFL);
  EXPECT_EQ(current_handler(SIGTERM), SIG_DFL);
}

TEST(PreemptionWatcher, LeavesUnwatchedSignalsAlone) {
  ScopedHandler usr2(SIGUSR2, custom_handler);
  g_custom_calls = 0;
  PreemptionWatcher watcher;
  EXPECT_EQ(current_handler(SIGUSR2), &custom_handler);
  ASSERT_EQ(raise(SIGUSR2), 0);
  EXPECT_EQ(g_custom_calls.load(), 1);
  EXPECT_FALSE(watcher.requested());
}

TEST(PreemptionWatcher, WatchesAConfiguredSignalOnly) {
  ScopedHandler usr1(SIGUSR1, custom_handler);
  g_custom_calls = 0;
  PreemptionWatcher watcher({SIGUSR2, SIGUSR2});
  EXPECT_EQ(watcher.signals(), std::vector<int>{SIGUSR2});
  EXPECT_EQ(current_handler(SIGUSR1), &custom_handler);
  ASSERT_EQ(raise(SIGUSR1), 0);
  EXPECT_FALSE(watcher.requested());
  EXPECT_EQ(g_custom_calls.load(), 1);
  ASSERT_EQ(raise(SIGUSR2), 0);
  EXPECT_TRUE(watcher.requested());
  EXPECT_EQ(watcher.signal_number(), SIGUSR2);
}

TEST(PreemptionWatcher, SecondWatcherIsRefusedAndTheFirstKeepsWorking) {
  PreemptionWatcher first;
  EXPECT_THROW({ PreemptionWatcher second; }, accelerate::Error);
  EXPECT_THROW({ PreemptionWatcher second({SIGUSR2}); }, accelerate::Error);
  // The refused watcher neither restored nor replaced anything.
  ASSERT_EQ(raise(SIGUSR1), 0);
  EXPECT_TRUE(first.requested());
}

TEST(PreemptionWatcher, CanBeInstalledAgainAfterTheFirstIsGone) {
  for (int round = 0; round < 3; ++round) {
    PreemptionWatcher watcher;
    ASSERT_EQ(raise(SIGTERM), 0);
    EXPECT_TRUE(watcher.requested()) << "round " << round;
  }
  EXPECT_EQ(current_handler(SIGTERM), SIG_DFL);
}

TEST(PreemptionWatcher, RefusesBadListsWithoutTouchingHandlers) {
  ScopedHandler usr1(SIGUSR1, custom_handler);
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{
           {}, {SIGUSR1, SIGKILL}, {SIGSTOP}, {SIGUSR1, SIGSEGV}, {0}, {-3}, {SIGUSR1, NSIG}, {SIGABRT}}) {
    EXPECT_THROW({ PreemptionWatcher watcher(bad); }, accelerate::ConfigError);
    EXPECT_EQ(current_handler(SIGUSR1), &custom_handler);
  }
  // A refused list leaves no watcher behind.
  PreemptionWatcher watcher;
  EXPECT_FALSE(watcher.requested());
}

TEST(PreemptionWatcher, ErrorsSayWhatToUse) {
  try {
    PreemptionWatcher watcher({SIGKILL});
    FAIL() << "SIGKILL accepted";
  } catch (const accelerate::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("SIGKILL"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("USR1"), std::string::npos) << e.what();
  }
  PreemptionWatcher first;
  try {
    PreemptionWatcher second;
    FAIL() << "second watcher accepted";
  } catch (const accelerate::Error& e) {
    EXPECT_NE(std::string(e.what()).find("already installed"), std::string::npos) << e.what();
  }
}

TEST(ParseSignalList, NamesNumbersAndSpacing) {
  using accelerate::parse_signal_list;
  EXPECT_EQ(parse_signal_list("USR1,TERM", "X"), (std::vector<int>{SIGUSR1, SIGTERM}));
  EXPECT_EQ(parse_signal_list(" sigusr2 , 15 ", "X"), (std::vector<int>{SIGUSR2, SIGTERM}));
  EXPECT_EQ(parse_signal_list("SIGXCPU", "X"), std::vector<int>{SIGXCPU});
  EXPECT_EQ(parse_signal_list("usr1,USR1,SIGUSR1", "X"), std::vector<int>{SIGUSR1});
}

TEST(ParseSignalList, RejectsJunkNamingTheSource) {
  using accelerate::parse_signal_list;
  for (const char* bad : {"", "USR1,", ",TERM", "FOO", "KILL", "SIGSEGV", "0", "9999", "USR1;TERM", "1x"}) {
    try {
      parse_signal_list(bad, "ACCELERATE_PREEMPTION_SIGNALS");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const accelerate::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("ACCELERATE_PREEMPTION_SIGNALS"), std::string::npos) << e.what();
    }
  }
}

TEST(SignalName, KnownAndUnknown) {
  EXPECT_EQ(accelerate::signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(accelerate::signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(accelerate::signal_name(SIGRTMIN + 1), "signal " + std::to_string(SIGRTMIN + 1));
}

accelerate::EnvironmentLookup lookup_in(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

TEST(RequeueCommand, PerScheduler) {
  using accelerate::requeue_command;
  EXPECT_EQ(requeue_command(lookup_in({{"SLURM_JOB_ID", "4242"}})), "scontrol requeue 4242");
  EXPECT_EQ(requeue_command(lookup_in({{"PBS_JOBID", "981.pbs-server"}})), "qrerun 981.pbs-server");
  // Array job ids carry brackets, which the shell must not glob.
  EXPECT_EQ(requeue_command(lookup_in({{"PBS_JOBID", "17[3].srv"}})), "qrerun '17[3].srv'");
  EXPECT_EQ(requeue_command(lookup_in({{"SLURM_JOB_ID", "7"}, {"PBS_JOBID", "8.x"}})), "scontrol requeue 7");
  EXPECT_EQ(requeue_command(lookup_in({})), std::nullopt);
  EXPECT_EQ(requeue_command(lookup_in({{"SLURM_JOB_ID", ""}})), std::nullopt);
}

TEST(RequeueCommand, ReadsTheProcessEnvironment) {
  const char* slurm = std::getenv("SLURM_JOB_ID");
  const char* pbs = std::getenv("PBS_JOBID");
  const std::optional<std::string> saved_slurm = slurm ? std::optional<std::string>(slurm) : std::nullopt;
  const std::optional<std::string> saved_pbs = pbs ? std::optional<std::string>(pbs) : std::nullopt;
  ::unsetenv("PBS_JOBID");
  ::setenv("SLURM_JOB_ID", "31337", 1);
  EXPECT_EQ(accelerate::requeue_command(), "scontrol requeue 31337");
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_EQ(accelerate::requeue_command(), std::nullopt);
  if (saved_slurm) ::setenv("SLURM_JOB_ID", saved_slurm->c_str(), 1);
  if (saved_pbs) ::setenv("PBS_JOBID", saved_pbs->c_str(), 1);
}

TEST(RequeueExitCode, IsExTempfail) { EXPECT_EQ(accelerate::kRequeueExitCode, 75); }

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
