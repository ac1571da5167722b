#include "accelerate/data/data_loader.hpp"

#include <ATen/record_function.h>

#include <algorithm>
#include <string>

#include "accelerate/data/collate.hpp"
#include "accelerate/data/rng_synchronizer.hpp"
#include "accelerate/data/skip.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

namespace detail {

NextBatchRange::NextBatchRange() {
  // No callback registered (no profiler runs): the range would record
  // nothing, so it is not built.
  if (!at::hasCallbacks()) return;
  range_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (range_->isActive()) {
    range_->before("accelerate::data_loader_next");
  } else {
    range_.reset();
  }
}

NextBatchRange::~NextBatchRange() = default;

}  // namespace detail

void DataLoaderBase::open_pass() {
  state_watch_.check("DataLoader::begin");
  // Accelerate's iteration counter: a loop that re-enters the loader after a
  // complete pass, without set_epoch, gets the next epoch's order rather than
  // silently repeating the last one. An abandoned pass does not count.
  if (epoch_completed_) {
    epoch_completed_ = false;
    position_.start_epoch(position_.epoch + 1);
  }
  if (rng_synchronizer_) rng_synchronizer_->synchronize();
  in_pass_ = true;
  if (listener_ != nullptr) listener_->pass_started(*this);
}

void DataLoaderBase::attach_state(const State* state, const std::vector<std::string>& rng_types,
                                  std::string_view component) {
  if (state != nullptr) state_watch_ = state->lifetime().watch();
  if (rng_types.empty()) return;
  if (state == nullptr) {
    detail::loader_error(component,
                         "rng_types asks for generators to be synchronised across processes, but the "
                         "loader was built from a DataLoaderPlacement, without a State to communicate "
                         "through. Build the loader from a State, or leave rng_types empty.");
  }
  rng_synchronizer_ = std::make_shared<detail::RngSynchronizer>(*state, rng_types, component);
}

void DataLoaderBase::check_next() const { state_watch_.check("DataLoader (next batch)"); }

void DataLoaderBase::set_epoch(std::int64_t epoch) {
  if (epoch < 0) {
    detail::loader_error("DataLoader::set_epoch",
                         "the epoch is " + std::to_string(epoch) + ", but epochs count from 0.");
  }
  epoch_completed_ = false;
  if (resume_pending_ && epoch == position_.epoch) return;
  drop_pass();
  resume_pending_ = false;
  position_.start_epoch(epoch);
  end_of_dataloader_ = false;
}

void DataLoaderBase::load_state_dict(const LoaderState::Dict& dict) {
  const LoaderState saved = LoaderState::from_state_dict(dict);
  // Saved once its epoch was over (at the end of an epoch, or an evaluation
  // loader): its next pass is a whole new epoch, at any global batch size or
  // world size. Only a known dataset size tells (streams go on below).
  const std::int64_t left = saved.dataset_size - saved.samples_consumed;
  const bool epoch_over =
      saved.dataset_size >= 0 && (left <= 0 || (drops_last_batch() && left < saved.global_batch_size));
  if (epoch_over) {
    drop_pass();
    epoch_completed_ = false;
    resume_pending_ = false;
    end_of_dataloader_ = false;
    position_.seed = saved.seed;
    position_.start_epoch(saved.epoch + 1);
    return;
  }
  const ResumePoint at = resume_point(saved, total_batch_size(), shard_options(), position_.dataset_size);
  drop_pass();
  epoch_completed_ = false;
  position_.seed = saved.seed;
  position_.epoch = at.epoch;
  position_.samples_consumed = at.batch_index * total_batch_size();
  // Saved once the epoch was over (e.g. an evaluation loader): its next pass
  // is a whole new epoch, not an empty remainder of the old one.
  const std::int64_t batches = batches_per_epoch();
  if (batches >= 0 && at.batch_index >= batches) position_.start_epoch(at.epoch + 1);
  resume_pending_ = true;
  end_of_dataloader_ = false;
}

void DataLoaderBase::skip_first_batches(std::int64_t num_batches) {
  detail::check_skip_count("DataLoader::skip_first_batches", num_batches);
  drop_pass();
  if (epoch_completed_) {
    epoch_completed_ = false;
    position_.start_epoch(position_.epoch + 1);
  }
  const std::int64_t batches = batches_per_epoch();
  position_.samples_consumed = (batches >= 0 ? std::min(num_batches, batches) : num_batches) * total_batch_size();
  resume_pending_ = true;
  end_of_dataloader_ = false;
}

std::int64_t DataLoaderBase::begin_position() {
  const std::int64_t start = resume_pending_ ? position_.batches_consumed() : 0;
  resume_pending_ = false;
  position_.samples_consumed = start * total_batch_size();
  end_of_dataloader_ = false;
  return start;
}

void DataLoaderBase::hand_out(std::int64_t index, bool last, std::int64_t epoch_batches) {
  end_of_dataloader_ = last;
  // A rank with one batch fewer (even_batches = false) reaches its end a
  // round early: the epoch is then complete as far as it is concerned.
  const std::int64_t done = last && epoch_batches >= 0 ? epoch_batches : index + 1;
  position_.samples_consumed = done * total_batch_size();
}

void DataLoaderBase::finish_pass(std::int64_t handed_out) {
  position_.samples_consumed = handed_out * total_batch_size();
  end_of_dataloader_ = true;
  if (in_pass_) {
    epoch_completed_ = true;
    in_pass_ = false;
    if (listener_ != nullptr) listener_->pass_finished(*this);
  }
}

}  // namespace accelerate
