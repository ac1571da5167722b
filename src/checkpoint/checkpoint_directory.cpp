#include "accelerate/checkpoint/checkpoint_directory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>  // renameat2
#include <cstdlib>
#include <string_view>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/timestamp.hpp"
#include "detail/deadline_comm.hpp"
#include "detail/remove_tree.hpp"

namespace accelerate::checkpoint {

namespace fs = std::filesystem;
using accelerate::detail::DeadlineComm;
using accelerate::detail::Reduce;

namespace {

// fsync of a file or directory; "" on success, else the reason.
std::string sync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "open('" + path.string() + "'): " + std::strerror(errno);
  std::string problem;
  if (::fsync(fd) != 0) problem = "fsync('" + path.string() + "'): " + std::strerror(errno);
  ::close(fd);
  return problem;
}

// Throws on every rank when any rank has a non-empty `problem`, with the
// first failing rank's text. Collective over `comm`.
void throw_if_any_failed(const DeadlineComm& comm, const std::string& problem, std::string_view during) {
  const std::string step = "checkpoint: " + std::string(during);
  const int first =
      comm.all_reduce(problem.empty() ? INT_MAX : comm.rank(), Reduce::Min, step + " (agreeing on success)");
  if (first == INT_MAX) return;
  std::string text = problem;
  comm.broadcast(text, first, step + " (the failing rank's reason)");
  throw Error("checkpoint: " + std::string(during) + " failed on rank " + std::to_string(first) + ": " + text);
}

// Hidden siblings of a checkpoint directory during a commit: the staged new
// one (".<name>.tmp-<nonce>") and, on file systems without an atomic
// exchange, the old one moved aside (".<name>.old-<nonce>").
std::vector<fs::path> siblings(const fs::path& final_directory, std::string_view infix) {
  std::vector<fs::path> found;
  const fs::path parent = final_directory.parent_path().empty() ? fs::path(".") : final_directory.parent_path();
  const std::string prefix = "." + final_directory.filename().string() + std::string(infix);
  std::error_code error;
  for (fs::directory_iterator it(parent, error), end; !error && it != end; it.increment(error)) {
    if (it->path().filename().string().rfind(prefix, 0) == 0) found.push_back(it->path());
  }
  return found;
}

std::string make_nonce() {
  std::random_device device;
  std::mt19937_64 engine((static_cast<std::uint64_t>(device()) << 32) ^ device() ^
                         static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(engine()));
  return text;
}

// Node index encoded in a state file name, -1 for "state.h5", nullopt otherwise.
std::optional<int> node_of_state_file(const std::string& name) {
  if (name == STATE_FILE_NAME) return -1;
  constexpr std::string_view prefix = "state.node";
  constexpr std::string_view suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(digits);
}

// Puts the committed staging directory under the final name. Where the
// final name exists (overwrite), the two are exchanged in one atomic step
// (renameat2 RENAME_EXCHANGE), so that the name always holds a complete
// checkpoint, and the old one is removed afterwards. File systems without
// the exchange (some network file systems) get two renames, old aside then
// new in place; a crash between them leaves both hidden siblings, which
// recover_interrupted_commit() puts back. "" on success, else the reason;
// `method` says which way was taken.
//
// Test hook: ACCELERATE_TEST_CHECKPOINT_NO_EXCHANGE=1 takes the two-rename
// way, as on a file system without the exchange.
std::string move_into_place(const fs::path& staging, const fs::path& final_directory, CommitMethod& method) {
  std::error_code error;
  if (fs::exists(final_directory, error)) {
    const char* no_exchange = std::getenv("ACCELERATE_TEST_CHECKPOINT_NO_EXCHANGE");
    const bool try_exchange = no_exchange == nullptr || std::string_view(no_exchange) != "1";
    if (try_exchange &&
        ::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_directory.c_str(), RENAME_EXCHANGE) == 0) {
      method = CommitMethod::Exchange;
      accelerate::detail::remove_tree(staging, error);  // now the old checkpoint
      return "";
    }
    if (try_exchange && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
      return "cannot exchange '" + staging.string() + "' with '" + final_directory.string() +
             "': " + std::strerror(errno);
    }
    const fs::path aside =
        final_directory.parent_path() / ("." + final_directory.filename().string() + ".old-" + make_nonce());
    fs::rename(final_directory, aside, error);
    if (error) return "cannot move '" + final_directory.string() + "' aside: " + error.message();
    fs::rename(staging, final_directory, error);
    if (error)
      return "cannot rename '" + staging.string() + "' to '" + final_directory.string() + "': " + error.message();
    method = CommitMethod::AsideThenRename;
    accelerate::detail::remove_tree(aside, error);
    return "";
  }
  fs::rename(staging, final_directory, error);
  if (error)
    return "cannot rename '" + staging.string() + "' to '" + final_directory.string() + "': " + error.message();
  method = CommitMethod::Rename;
  return "";
}

}  // namespace

std::string state_file_name(bool save_on_each_node, int node) {
  if (!save_on_each_node) return std::string(STATE_FILE_NAME);
  return "state.node" + std::to_string(node) + ".h5";
}

std::optional<Manifest> read_complete_manifest(const fs::path& directory) {
  const fs::path path = directory / MANIFEST_NAME;
  std::ifstream in(path, std::ios::binary);
  std::error_code error;
  if (!in || fs::file_size(path, error) > detail::kMaxManifestBytes || error) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    Manifest manifest = detail::parse_manifest(buffer.str(), path.string());
    for (const ManifestFile& file : manifest.files) {
      const auto size = fs::file_size(directory / file.name, error);
      if (error || size != file.bytes) return std::nullopt;
    }
    return manifest;
  } catch (const ConfigError&) {
    return std::nullopt;  // a malformed manifest marks an incomplete checkpoint
  }
}

std::optional<std::int64_t> checkpoint_index(const fs::path& directory) {
  const std::string name = directory.filename().string();
  constexpr std::string_view prefix = "checkpoint_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  if (*first == '+' || *first == '-' || (*first == '0' && last - first > 1)) return std::nullopt;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end != last) return std::nullopt;
  return value;
}

std::vector<fs::path> list_checkpoints(const fs::path& root) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code error;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    const auto index = checkpoint_index(it->path());
    if (!index || !it->is_directory()) continue;
    if (read_complete_manifest(it->path())) found.emplace_back(*index, it->path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> result;
  for (auto& [index, path] : found) result.push_back(std::move(path));
  return result;
}

std::optional<fs::path> latest_checkpoint(const fs::path& root) {
  std::vector<fs::path> all = list_checkpoints(root);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::vector<fs::path> rotate_checkpoints(const fs::path& root, int total_limit, const fs::path& keep) {
  std::vector<fs::path> removed;
  if (total_limit < 1) return removed;  // never delete everything
  std::vector<fs::path> complete = list_checkpoints(root);
  std::size_t excess = complete.size() > static_cast<std::size_t>(total_limit)
                           ? complete.size() - static_cast<std::size_t>(total_limit)
                           : 0;
  for (std::size_t i = 0; i + 1 < complete.size() && excess > 0; ++i) {  // never the newest
    const fs::path& candidate = complete[i];
    std::error_code error;
    if (fs::equivalent(candidate, keep, error)) continue;
    // Rename first: the directory leaves the naming scheme atomically, so a
    // crash during the removal cannot leave a half-deleted "checkpoint_<i>".
    const fs::path trash = candidate.parent_path() / ("." + candidate.filename().string() + ".trash-" + make_nonce());
    fs::rename(candidate, trash, error);
    if (error) continue;
    accelerate::detail::remove_tree(trash, error);
    removed.push_back(candidate);
    --excess;
  }
  if (!removed.empty()) sync_path(root, true);
  return removed;
}

std::optional<std::string> recover_interrupted_commit(const fs::path& final_directory) {
  std::error_code error;
  if (fs::exists(final_directory, error)) return std::nullopt;
  // A staged directory with a complete manifest was committed in all but
  // its name: every rank had agreed on success before the manifest was written.
  for (const std::string_view infix : {".tmp-", ".old-"}) {
    for (const fs::path& candidate : siblings(final_directory, infix)) {
      if (!read_complete_manifest(candidate)) continue;
      fs::rename(candidate, final_directory, error);
      if (error) continue;
      sync_path(final_directory.parent_path().empty() ? fs::path(".") : final_directory.parent_path(), true);
      return std::string(infix == ".tmp-" ? "completed the interrupted commit of " : "restored the previous ") +
             "checkpoint '" + final_directory.string() + "' from '" + candidate.filename().string() + "'";
    }
  }
  return std::nullopt;
}

StagedCheckpoint::StagedCheckpoint(fs::path final_directory, const StagingOptions& options)
    : final_(std::move(final_directory)), options_(options) {
  const DeadlineComm world(options.world.get(), options.timeout);
  leader_ = DeadlineComm(options.file_comm.get(), options.timeout).rank() == 0;
  if (final_.filename().empty()) final_ = final_.parent_path();  // "dir/" -> "dir"

  std::string nonce = world.rank() == 0 ? make_nonce() : std::string();
  world.broadcast(nonce, 0, "StagedCheckpoint: broadcast of the staging directory's name");
  staging_ = final_.parent_path() / ("." + final_.filename().string() + ".tmp-" + nonce);

  std::string problem;
  if (leader_) {
    std::error_code error;
    if (fs::exists(final_, error) && !options.overwrite) {
      problem = "'" + final_.string() +
                "' already exists. Choose another directory, pass overwrite, or with automatic naming restore "
                "ProjectConfiguration::iteration from the latest checkpoint.";
    } else {
      if (!final_.parent_path().empty()) fs::create_directories(final_.parent_path(), error);
      if (!error) fs::create_directory(staging_, error);  // may already exist: nodes sharing a file system
      if (error) problem = "cannot create '" + staging_.string() + "': " + error.message();
    }
  }
  throw_if_any_failed(world, problem, "preparing " + final_.string());
}

StagedCheckpoint::~StagedCheckpoint() {
  if (committed_ || !leader_) return;
  std::error_code ignored;
  accelerate::detail::remove_tree(staging_, ignored);
}

fs::path StagedCheckpoint::file_path() const {
  return staging_ / state_file_name(options_.save_on_each_node, options_.node_index);
}

void StagedCheckpoint::commit(bool local_ok, Manifest manifest, std::optional<int> total_limit) {
  // Test hook for the crash tests: hold the save between writing the data
  // and committing it, so that a test can kill a rank exactly there.
  if (const char* pause = std::getenv("ACCELERATE_TEST_CHECKPOINT_PAUSE"); pause != nullptr && *pause != '\0') {
    std::cerr << "checkpoint test hook: data written to " << staging_.string() << ", pausing " << pause
              << " s before commit" << std::endl;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(pause)));
  }
  const DeadlineComm world(options_.world.get(), options_.timeout);
  std::string problem = local_ok ? "" : "this rank's part of the save failed (see its error above)";
  // Every rank flushes the file it wrote to: on parallel file systems a
  // client's fsync covers only the data that client wrote.
  if (problem.empty()) problem = sync_path(file_path(), false);
  throw_if_any_failed(world, problem, "writing " + final_.string());

  // With save_on_each_node on a file system the nodes share, several leaders
  // see one staging directory: the one with the lowest node index owns it.
  bool owner = false;
  std::vector<ManifestFile> files;
  if (leader_) {
    int lowest = INT_MAX;
    std::error_code error;
    for (fs::directory_iterator it(staging_, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      const auto node = node_of_state_file(name);
      if (!node) continue;
      lowest = std::min(lowest, *node);
      files.push_back(ManifestFile{name, static_cast<std::uint64_t>(fs::file_size(it->path(), error))});
    }
    owner = lowest == (options_.save_on_each_node ? options_.node_index : -1);
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  }
  world.barrier("StagedCheckpoint::commit (barrier: every leader listed the files before the rename)");

  problem.clear();
  if (owner) {
    manifest.format = std::string(FORMAT_NAME);
    manifest.format_version = FORMAT_VERSION;
    manifest.num_nodes = options_.num_nodes;
    manifest.save_on_each_node = options_.save_on_each_node;
    manifest.files = files;
    if (manifest.created.empty()) manifest.created = detail::utc_now();
    const fs::path manifest_path = staging_ / MANIFEST_NAME;
    {
      std::ofstream out(manifest_path, std::ios::binary | std::ios::trunc);
      out << detail::manifest_json(manifest).dump() << "\n";
      if (!out.flush()) problem = "cannot write '" + manifest_path.string() + "'";
    }
    if (problem.empty()) problem = sync_path(manifest_path, false);
    if (problem.empty()) problem = sync_path(staging_, true);
    if (problem.empty()) problem = move_into_place(staging_, final_, method_);
    if (problem.empty()) problem = sync_path(final_.parent_path().empty() ? fs::path(".") : final_.parent_path(), true);
  }
  throw_if_any_failed(world, problem, "committing " + final_.string());
  committed_ = true;

  if (owner && total_limit) rotate_checkpoints(final_.parent_path(), *total_limit, final_);
  world.barrier("StagedCheckpoint::commit (barrier after the rotation of old checkpoints)");
}

}  // namespace accelerate::checkpoint
