#include "accelerate/tracking/tensorboard_tracker.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensorboard_event.pb.h"
#include "tracking/event_file.hpp"
#include "tracking/run_directory.hpp"

namespace accelerate::tracking {
namespace pb = tensorboard;

namespace {

constexpr int kDtypeString = 7;     // TensorFlow's DT_STRING
constexpr int kHParamsVersion = 0;  // the plugin data version TensorBoard reads
constexpr const char* kFileVersion = "brain.Event:2";

// A text summary as TensorBoard's Text plugin expects it: a string tensor of
// one element under plugin "text".
void set_text(pb::Summary::Value& value, const std::string& text) {
  pb::TensorProto& tensor = *value.mutable_tensor();
  tensor.set_dtype(kDtypeString);
  tensor.mutable_tensor_shape()->add_dim()->set_size(1);
  tensor.add_string_val(text);
  value.mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
}

void set_histogram(pb::HistogramProto& histogram, std::span<const double> values, int bins) {
  std::vector<double> finite;
  finite.reserve(values.size());
  for (double v : values) {
    if (std::isfinite(v)) finite.push_back(v);
  }
  if (finite.empty()) return;  // an empty histogram: every field zero
  const auto [low, high] = std::minmax_element(finite.begin(), finite.end());
  const double min = *low;
  const double max = *high;
  double sum = 0;
  double sum_squares = 0;
  for (double v : finite) {
    sum += v;
    sum_squares += v * v;
  }
  histogram.set_min(min);
  histogram.set_max(max);
  histogram.set_num(static_cast<double>(finite.size()));
  histogram.set_sum(sum);
  histogram.set_sum_squares(sum_squares);
  // All values equal: one bucket ending at them.
  const int count = (max > min) ? std::max(bins, 1) : 1;
  std::vector<double> counts(static_cast<std::size_t>(count), 0.0);
  const double width = (max - min) / count;
  for (double v : finite) {
    const auto index = (width > 0) ? static_cast<std::size_t>((v - min) / width) : 0;
    counts[std::min(index, counts.size() - 1)] += 1;
  }
  for (int i = 0; i < count; ++i) {
    // The last edge is max itself, not min + count * width rounded.
    histogram.add_bucket_limit(i + 1 == count ? max : min + (i + 1) * width);
    histogram.add_bucket(counts[static_cast<std::size_t>(i)]);
  }
}

}  // namespace

struct TensorBoardTracker::Writer {
  explicit Writer(const std::filesystem::path& directory) : file(directory) {}

  // One event per call, stamped now; the step moves the default step on.
  void write(pb::Event& event, std::optional<std::int64_t> step) {
    const std::int64_t at = step.value_or(next_step);
    event.set_wall_time(detail::wall_time());
    event.set_step(at);
    next_step = at + 1;
    file.append(event.SerializeAsString());
  }

  detail::EventFile file;
  std::int64_t next_step = 0;
};

TensorBoardTracker::TensorBoardTracker(const std::filesystem::path& logging_dir, const std::string& project_name)
    : writer_(std::make_unique<Writer>(detail::make_run_directory("tensorboard", logging_dir, project_name))) {
  // The first record of every event file says which format follows.
  pb::Event header;
  header.set_wall_time(detail::wall_time());
  header.set_file_version(kFileVersion);
  writer_->file.append(header.SerializeAsString());
}

TensorBoardTracker::~TensorBoardTracker() = default;

const std::filesystem::path& TensorBoardTracker::event_file() const { return writer_->file.path(); }

void TensorBoardTracker::store_init_configuration(const LogValues& config) {
  pb::HParamsPluginData plugin;
  plugin.set_version(kHParamsVersion);
  pb::SessionStartInfo& start = *plugin.mutable_session_start_info();
  start.set_start_time_secs(detail::wall_time());
  for (const auto& [name, value] : config) {
    pb::HParamValue& entry = (*start.mutable_hparams())[name];
    std::visit(
        [&entry](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            entry.set_string_value(v);
          } else {
            entry.set_number_value(static_cast<double>(v));
          }
        },
        value.get());
  }
  pb::Event event;
  pb::Summary::Value& value = *event.mutable_summary()->add_value();
  // The tag TensorBoard's own hparams writer uses for a session's start.
  value.set_tag("_hparams_/session_start_info");
  pb::SummaryMetadata::PluginData& data = *value.mutable_metadata()->mutable_plugin_data();
  data.set_plugin_name("hparams");
  data.set_content(plugin.SerializeAsString());
  // Not a step of the run: written at step 0 without moving the default step.
  event.set_wall_time(detail::wall_time());
  event.set_step(0);
  writer_->file.append(event.SerializeAsString());
}

void TensorBoardTracker::log(const LogValues& values, std::optional<std::int64_t> step) {
  pb::Event event;
  pb::Summary& summary = *event.mutable_summary();
  for (const auto& [name, logged] : values) {
    pb::Summary::Value& value = *summary.add_value();
    value.set_tag(name);
    std::visit(
        [&value](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            set_text(value, v);
          } else {
            value.set_simple_value(static_cast<float>(v));
          }
        },
        logged.get());
  }
  writer_->write(event, step);
}

void TensorBoardTracker::log_histogram(const std::string& tag, std::span<const double> values,
                                       std::optional<std::int64_t> step, int bins) {
  pb::Event event;
  pb::Summary::Value& value = *event.mutable_summary()->add_value();
  value.set_tag(tag);
  set_histogram(*value.mutable_histo(), values, bins);
  writer_->write(event, step);
}

void TensorBoardTracker::finish() { writer_->file.close(); }

}  // namespace accelerate::tracking
