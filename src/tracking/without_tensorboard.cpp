// The TensorBoard tracker in a build without protobuf: the same class,
// whose constructor throws FeatureNotBuilt, so programs link either way.
#include "accelerate/error.hpp"
#include "accelerate/tracking/tensorboard_tracker.hpp"

namespace accelerate::tracking {

struct TensorBoardTracker::Writer {};

TensorBoardTracker::TensorBoardTracker(const std::filesystem::path&, const std::string&) {
  detail::throw_feature_not_built("TensorBoard (protobuf)", "TensorBoardTracker", "ACCELERATE_WITH_TENSORBOARD");
}

TensorBoardTracker::~TensorBoardTracker() = default;

// Unreachable: no object of this class can be made in this build.
void TensorBoardTracker::store_init_configuration(const LogValues&) {}
void TensorBoardTracker::log(const LogValues&, std::optional<std::int64_t>) {}
void TensorBoardTracker::log_histogram(const std::string&, std::span<const double>, std::optional<std::int64_t>, int) {}
void TensorBoardTracker::finish() {}
const std::filesystem::path& TensorBoardTracker::event_file() const {
  static const std::filesystem::path none;
  return none;
}

}  // namespace accelerate::tracking
