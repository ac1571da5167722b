// The TensorBoard tracker ("tensorboard"): event files that TensorBoard
// reads, written on the main process into <logging_dir>/<project_name>/.
//
//   numbers   scalars (TensorBoard keeps them as 32-bit floats)
//   text      text summaries (the Text dashboard)
//   config    hyper-parameters (the HParams dashboard), from init_trackers
//   log_histogram  histograms (the Histograms and Distributions dashboards)
//
// Every call is flushed at once, so a run that dies keeps what it logged; a
// resumed run adds a new event file to the same directory and TensorBoard
// shows both as one run. Needs the build's TensorBoard feature (protobuf);
// without it the constructor throws FeatureNotBuilt. docs/tracking.md.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "accelerate/tracking/tracker.hpp"

namespace accelerate::tracking {

class TensorBoardTracker final : public GeneralTracker {
 public:
  /// Creates <logging_dir>/<project_name>/ and a new event file there.
  /// ConfigError when either cannot be made, naming the path.
  TensorBoardTracker(const std::filesystem::path& logging_dir, const std::string& project_name);
  ~TensorBoardTracker() override;
  TensorBoardTracker(const TensorBoardTracker&) = delete;
  TensorBoardTracker& operator=(const TensorBoardTracker&) = delete;

  [[nodiscard]] std::string name() const override { return "tensorboard"; }
  /// The hyper-parameters, as the hparams plugin's session start.
  void store_init_configuration(const LogValues& config) override;
  /// One event: a scalar per number, a text summary per text. Without a
  /// step, the step after the last one logged (0 first), so values logged
  /// without steps do not pile up on step 0.
  void log(const LogValues& values, std::optional<std::int64_t> step) override;
  /// A histogram of the finite values, in `bins` buckets of equal width
  /// between their minimum and maximum; NaN and infinities are left out.
  void log_histogram(const std::string& tag, std::span<const double> values, std::optional<std::int64_t> step,
                     int bins) override;
  void finish() override;

  /// The event file this tracker writes.
  [[nodiscard]] const std::filesystem::path& event_file() const;

 private:
  struct Writer;
  std::unique_ptr<Writer> writer_;
};

}  // namespace accelerate::tracking
