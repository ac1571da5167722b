// Scoped changes to the process environment (seeds: patch_environment,
// clear_environment) and typed reads of single variables.
//
// Both guards restore the previous environment when they leave scope, also
// when the scope is left by an exception. The environment is process-wide:
// do not patch it while other threads read it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accelerate {

/// Sets variables for the lifetime of the guard. Keys are upper-cased, as in
/// Accelerate; previous values (or their absence) come back on destruction.
class [[nodiscard]] EnvironmentPatch {
 public:
  explicit EnvironmentPatch(const std::map<std::string, std::string>& variables);
  ~EnvironmentPatch();
  EnvironmentPatch(const EnvironmentPatch&) = delete;
  EnvironmentPatch& operator=(const EnvironmentPatch&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// Empties the environment for the lifetime of the guard, then restores it exactly.
class [[nodiscard]] EnvironmentClear {
 public:
  EnvironmentClear();
  ~EnvironmentClear();
  EnvironmentClear(const EnvironmentClear&) = delete;
  EnvironmentClear& operator=(const EnvironmentClear&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

/// `auto patch = patch_environment({{"foo", "bar"}});` sets FOO=bar until `patch` dies.
inline EnvironmentPatch patch_environment(const std::map<std::string, std::string>& variables) {
  return EnvironmentPatch(variables);
}

/// `auto cleared = clear_environment();` empties the environment until `cleared` dies.
inline EnvironmentClear clear_environment() { return EnvironmentClear(); }

/// The value of `name`, or nullopt when unset.
std::optional<std::string> get_env(const std::string& name);

/// Boolean variable: 1/true/yes/on and 0/false/no/off (any case); unset or
/// empty gives `fallback`; anything else throws ConfigError naming the variable.
bool env_flag(const std::string& name, bool fallback);
/// The same, with nullopt for an unset or empty variable.
std::optional<bool> env_bool(const std::string& name);

/// Integer variable within [min, max]; unset gives nullopt; junk or out of range throws ConfigError.
std::optional<long long> env_int(const std::string& name, long long min, long long max);

/// Variable restricted to `choices` (compared case-insensitively, returned lower-case).
std::optional<std::string> env_choice(const std::string& name, const std::vector<std::string>& choices);

}  // namespace accelerate
