// Dict batches (input_ids, attention_mask, labels) of variable-length token
// sequences through every loader kind at 1, 2 and 4 ranks: DataLoaderShard
// and StreamDataLoaderShard pad each rank's batch to its longest sample,
// DataLoaderDispatcher pads the global batch on the main process and
// scatters every key's slice. Each rank must receive exactly the samples the
// data/target path gives for the same settings (split_batches, even_batches
// and its wrapped-around samples, drop_last, resume mid-epoch), padded with
// each key's pad value; Accelerator::prepare takes such a loader and
// gather_for_metrics takes its dicts.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../common/test_helpers.hpp"
#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/padding_collate.hpp"
#include "accelerate/data/prepare_data_loader.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/accelerator.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::BatchSamplerShard;
using accelerate::DataLoaderConfiguration;
using accelerate::DataLoaderDispatcher;
using accelerate::DataLoaderOptions;
using accelerate::DataLoaderShard;
using accelerate::PaddingCollate;
using accelerate::State;
using accelerate::StreamDataLoaderShard;
using Indices = std::vector<std::int64_t>;
using TensorMap = std::map<std::string, torch::Tensor>;

constexpr std::int64_t kLabelPad = -100;

/// Sample i has 1 + (7i mod 5) tokens.
std::int64_t length_of(std::int64_t i) { return 1 + (7 * i) % 5; }

/// Sample i: input_ids 1000(i+1) + j, an attention mask of ones, labels equal
/// to the ids, and a per-sample float weight i/2 (a 0-d value).
TensorMap token_sample(std::int64_t i) {
  const std::int64_t length = length_of(i);
  const torch::Tensor ids = torch::arange(length, torch::kInt64) + 1000 * (i + 1);
  return {{"input_ids", ids},
          {"attention_mask", torch::ones({length}, torch::kInt64)},
          {"labels", ids.clone()},
          {"weight", torch::tensor(0.5F * static_cast<float>(i))}};
}

torch::data::Example<> example_sample(std::int64_t i) { return {torch::tensor({i}), torch::tensor(i)}; }

/// Map-style datasets of n samples: token dicts, and the data/target
/// examples of the same indices.
class Tokens {
 public:
  explicit Tokens(std::size_t n) : n_(n) {}
  TensorMap get(std::size_t index) const { return token_sample(static_cast<std::int64_t>(index)); }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
};

class Examples {
 public:
  explicit Examples(std::size_t n) : n_(n) {}
  torch::data::Example<> get(std::size_t index) const { return example_sample(static_cast<std::int64_t>(index)); }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
};

/// The samples 0 … n-1 as a stream, at most 3 per get_batch.
template <class Sample, Sample (*make)(std::int64_t)>
class Stream {
 public:
  explicit Stream(std::int64_t n) : n_(n) {}
  std::vector<Sample> get_batch(std::size_t want) {
    std::vector<Sample> out;
    for (std::size_t k = 0; k < std::min<std::size_t>(want, 3) && next_ < n_; ++k) out.push_back(make(next_++));
    return out;
  }
  void reset() { next_ = 0; }

 private:
  std::int64_t n_;
  std::int64_t next_ = 0;
};
using TokenStream = Stream<TensorMap, &token_sample>;
using ExampleStream = Stream<torch::data::Example<>, &example_sample>;

static_assert(accelerate::StreamDataset<TokenStream>);
static_assert(accelerate::ScatterableBatch<TensorMap>);

PaddingCollate token_collate() { return PaddingCollate({.pad_values = {{"labels", kLabelPad}}}); }

Indices values_of(const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.to(torch::kCPU).to(torch::kInt64).contiguous();
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

std::int64_t longest(const Indices& indices) {
  std::int64_t most = 0;
  for (const std::int64_t i : indices) most = std::max(most, length_of(i));
  return most;
}

/// The samples of a padded token batch, after checking every row: its
/// tokens, then the pad values (0 for input_ids and attention_mask, -100 for
/// labels) up to `width` (-1: the batch's own longest sample).
Indices samples_of(const TensorMap& batch, std::int64_t width = -1) {
  Indices indices;
  EXPECT_EQ(batch.size(), 4U);
  const torch::Tensor ids = batch.at("input_ids");
  const torch::Tensor mask = batch.at("attention_mask");
  const torch::Tensor labels = batch.at("labels");
  const torch::Tensor weight = batch.at("weight");
  EXPECT_EQ(ids.scalar_type(), torch::kInt64);
  EXPECT_EQ(weight.scalar_type(), torch::kFloat);
  EXPECT_EQ(ids.dim(), 2);
  EXPECT_EQ(weight.dim(), 1);
  for (std::int64_t row = 0; row < ids.size(0); ++row) indices.push_back(ids[row][0].item<std::int64_t>() / 1000 - 1);
  const std::int64_t want = width >= 0 ? width : longest(indices);
  EXPECT_EQ(ids.sizes(), (std::vector<std::int64_t>{static_cast<std::int64_t>(indices.size()), want}));
  EXPECT_EQ(mask.sizes(), ids.sizes());
  EXPECT_EQ(labels.sizes(), ids.sizes());
  for (std::size_t row = 0; row < indices.size(); ++row) {
    const std::int64_t i = indices[row];
    Indices tokens;
    Indices ones;
    Indices label_row;
    for (std::int64_t j = 0; j < want; ++j) {
      const bool real = j < length_of(i);
      tokens.push_back(real ? 1000 * (i + 1) + j : 0);
      ones.push_back(real ? 1 : 0);
      label_row.push_back(real ? 1000 * (i + 1) + j : kLabelPad);
    }
    const auto r = static_cast<std::int64_t>(row);
    EXPECT_EQ(values_of(ids[r]), tokens) << "sample " << i;
    EXPECT_EQ(values_of(mask[r]), ones) << "sample " << i;
    EXPECT_EQ(values_of(labels[r]), label_row) << "sample " << i;
    EXPECT_FLOAT_EQ(weight[r].item<float>(), 0.5F * static_cast<float>(i));
  }
  return indices;
}

/// The widest sample of step k over all ranks (the dispatcher pads the global batch).
std::int64_t global_longest(const Indices& mine) {
  std::int64_t most = longest(mine);
  MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

template <class Loader>
std::vector<Indices> example_pass(Loader& loader) {
  std::vector<Indices> out;
  for (const torch::data::Example<>& batch : loader) out.push_back(values_of(batch.target));
  return out;
}

/// A pass of token batches, each checked; `global` when the width is the global batch's.
template <class Loader>
std::vector<Indices> token_pass(Loader& loader, bool global, std::vector<bool>* ends = nullptr) {
  std::vector<Indices> out;
  for (const TensorMap& batch : loader) {
    // The dispatcher pads to the longest sample of the global batch.
    const Indices rows = values_of(batch.at("input_ids").select(1, 0).div(1000, "floor") - 1);
    out.push_back(samples_of(batch, global ? global_longest(rows) : -1));
    EXPECT_EQ(out.back(), rows);
    if (ends != nullptr) ends->push_back(loader.end_of_dataloader());
  }
  return out;
}

struct Case {
  std::int64_t n;
  std::int64_t batch_size;
  bool split;
  bool even;
  bool drop_last;
  bool shuffle;
};

std::string name_of(const Case& c) {
  return "n=" + std::to_string(c.n) + " batch=" + std::to_string(c.batch_size) + " split=" + std::to_string(c.split) +
         " even=" + std::to_string(c.even) + " drop_last=" + std::to_string(c.drop_last) +
         " shuffle=" + std::to_string(c.shuffle);
}

const std::vector<Case>& map_cases() {
  static const std::vector<Case> cases{{10, 3, false, true, false, false}, {10, 3, false, false, false, false},
                                       {11, 4, true, true, false, true},   {9, 2, false, true, true, true},
                                       {3, 4, false, true, false, false},  {13, 4, true, false, false, false}};
  return cases;
}

TEST(DictBatches, DataLoaderShardGivesEachRankTheExampleSamplesPadded) {
  const State state;
  const int p = state.num_processes();
  const int r = state.process_index();
  for (const Case& c : map_cases()) {
    if (c.split && c.batch_size % p != 0) continue;
    SCOPED_TRACE(name_of(c));
    const DataLoaderOptions options{.batch_size = c.batch_size, .shuffle = c.shuffle, .drop_last = c.drop_last};
    const DataLoaderConfiguration config{.split_batches = c.split, .even_batches = c.even, .data_seed = 11};
    DataLoaderShard tokens(Tokens(c.n), state, options, config, token_collate());
    static_assert(std::is_same_v<decltype(tokens)::Batch, TensorMap>);
    DataLoaderShard examples(Examples(c.n), state, options, config);
    Indices order(static_cast<std::size_t>(c.n));
    std::iota(order.begin(), order.end(), 0);
    if (c.shuffle) order = accelerate::seeded_permutation(c.n, 11, 0);
    // Rank r's batches by the sharding rule, the wrapped-around samples of
    // even_batches included.
    const auto model =
        BatchSamplerShard(order, c.batch_size, c.drop_last,
                          {.num_processes = p, .process_index = r, .split_batches = c.split, .even_batches = c.even})
            .batches();
    std::vector<bool> ends;
    const auto got = token_pass(tokens, false, &ends);
    EXPECT_EQ(got, example_pass(examples));
    EXPECT_EQ(got, model);
    for (std::size_t k = 0; k < ends.size(); ++k) EXPECT_EQ(ends[k], k + 1 == ends.size());
    EXPECT_EQ(tokens.remainder(), examples.remainder());
  }
}

TEST(DictBatches, DataLoaderDispatcherScattersEveryKeyOfTheGlobalBatch) {
  const State state;
  const int p = state.num_processes();
  for (const Case& c : map_cases()) {
    if (c.split && c.batch_size % p != 0) continue;
    SCOPED_TRACE(name_of(c));
    const DataLoaderOptions options{.batch_size = c.batch_size, .shuffle = c.shuffle, .drop_last = c.drop_last};
    const DataLoaderConfiguration config{.split_batches = c.split,
                                         .dispatch_batches = true,
                                         .even_batches = c.even,
                                         .data_seed = 11};
    DataLoaderDispatcher tokens(Tokens(c.n), state, options, config, token_collate());
    static_assert(std::is_same_v<decltype(tokens)::Batch, TensorMap>);
    DataLoaderDispatcher examples(Examples(c.n), state, options, config);
    for (int pass = 0; pass < 2; ++pass) {
      tokens.set_epoch(pass);
      examples.set_epoch(pass);
      std::vector<bool> ends;
      EXPECT_EQ(token_pass(tokens, true, &ends), example_pass(examples)) << "epoch " << pass;
      for (std::size_t k = 0; k < ends.size(); ++k) EXPECT_EQ(ends[k], k + 1 == ends.size());
    }
    EXPECT_EQ(tokens.remainder(), examples.remainder());
    // Every rank's slice of every key crossed MPI once.
    EXPECT_EQ(tokens.samples_sent(), examples.samples_sent());
  }
}

TEST(DictBatches, StreamsOfDictsPadPerRankOrPerGlobalBatch) {
  const State state;
  const int p = state.num_processes();
  for (const Case& c : std::vector<Case>{{10, 2, false, true, false, false},
                                         {11, 4, false, true, true, false},
                                         {3, 4, false, true, false, false},
                                         {17, 4, true, true, false, false}}) {
    if (c.split && c.batch_size % p != 0) continue;
    SCOPED_TRACE(name_of(c));
    const DataLoaderOptions options{.batch_size = c.batch_size, .drop_last = c.drop_last};
    // Every rank reads the stream and keeps its slice of each round.
    const DataLoaderConfiguration shard{.split_batches = c.split, .dispatch_batches = false};
    StreamDataLoaderShard tokens(TokenStream(c.n), state, options, shard, token_collate());
    StreamDataLoaderShard examples(ExampleStream(c.n), state, options, shard);
    const auto want = example_pass(examples);
    for (int pass = 0; pass < 2; ++pass) EXPECT_EQ(token_pass(tokens, false), want) << "pass " << pass;
    // The main process reads it and scatters.
    const DataLoaderConfiguration dispatch{.split_batches = c.split};
    auto dispatched = accelerate::prepare_data_loader(TokenStream(c.n), state, options, dispatch, token_collate());
    static_assert(std::is_same_v<decltype(dispatched), std::unique_ptr<accelerate::BasicDataLoader<TensorMap>>>);
    auto reference = accelerate::prepare_data_loader(ExampleStream(c.n), state, options, dispatch);
    EXPECT_EQ(token_pass(*dispatched, true), example_pass(*reference));
  }
}

TEST(DictBatches, ResumeMidEpochContinuesWithTheSameSamples) {
  const State state;
  const int p = state.num_processes();
  if (4 % p != 0) GTEST_SKIP() << "needs a world size dividing 4";
  const DataLoaderOptions options{.batch_size = 4, .shuffle = true};
  const DataLoaderConfiguration shard{.split_batches = true, .data_seed = 5};
  const DataLoaderConfiguration dispatch{.split_batches = true, .dispatch_batches = true, .data_seed = 5};
  auto check = [&](auto make, bool global) {
    auto whole = make();
    const auto all = token_pass(*whole, global);
    ASSERT_GE(all.size(), 3U);
    // Saved after two batches.
    auto first = make();
    std::size_t k = 0;
    for (const TensorMap& batch : *first) {
      (void)batch;
      if (++k == 2) break;
    }
    const auto saved = first->state_dict();
    auto resumed = make();
    resumed->load_state_dict(saved);
    EXPECT_EQ(token_pass(*resumed, global), std::vector<Indices>(all.begin() + 2, all.end()));
    auto skipped = make();
    skipped->skip_first_batches(2);
    EXPECT_EQ(token_pass(*skipped, global), std::vector<Indices>(all.begin() + 2, all.end()));
  };
  {
    SCOPED_TRACE("DataLoaderShard");
    check(
        [&] {
          return std::make_unique<DataLoaderShard<Tokens, PaddingCollate>>(Tokens(23), state, options, shard,
                                                                           token_collate());
        },
        false);
  }
  {
    SCOPED_TRACE("DataLoaderDispatcher");
    check(
        [&] {
          return std::make_unique<DataLoaderDispatcher<Tokens, PaddingCollate>>(Tokens(23), state, options, dispatch,
                                                                                token_collate());
        },
        true);
  }
  const DataLoaderOptions in_order{.batch_size = 4};
  {
    SCOPED_TRACE("StreamDataLoaderShard");
    const DataLoaderConfiguration stream{.split_batches = true, .dispatch_batches = false};
    check(
        [&] {
          return std::make_unique<StreamDataLoaderShard<TokenStream, PaddingCollate>>(TokenStream(23), state, in_order,
                                                                                      stream, token_collate());
        },
        false);
  }
  {
    SCOPED_TRACE("DataLoaderDispatcher over a stream");
    const DataLoaderConfiguration stream{.split_batches = true};
    check(
        [&] {
          return std::make_unique<DataLoaderDispatcher<TokenStream, PaddingCollate>>(TokenStream(23), state, in_order,
                                                                                     stream, token_collate());
        },
        true);
  }
}

/// Sample i as an IValue: {"x": [i, i] (float), "pair": ([i], i), "id": i}.
class NestedDataset {
 public:
  explicit NestedDataset(std::size_t n) : n_(n) {}
  c10::IValue get(std::size_t index) const {
    const auto i = static_cast<std::int64_t>(index);
    c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
    dict.insert("x", torch::full({2}, static_cast<double>(i)));
    dict.insert("pair", c10::ivalue::Tuple::create({torch::tensor({i}), torch::tensor(i)}));
    dict.insert("id", i);
    return dict;
  }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
};

TEST(DictBatches, NestedIValueBatchesAreScatteredLikeMaps) {
  const State state;
  const DataLoaderConfiguration dispatch{.dispatch_batches = true};
  DataLoaderDispatcher nested(NestedDataset(7), state, {.batch_size = 2}, dispatch);
  static_assert(std::is_same_v<decltype(nested)::Batch, c10::IValue>);
  DataLoaderDispatcher examples(Examples(7), state, {.batch_size = 2}, dispatch);
  std::vector<Indices> got;
  for (const c10::IValue& batch : nested) {
    const c10::impl::GenericDict dict = batch.toGenericDict();
    const Indices ids = values_of(dict.at("id").toTensor());
    EXPECT_EQ(values_of(dict.at("x").toTensor().select(1, 1)), ids);
    const auto& pair = dict.at("pair").toTupleRef().elements();
    ASSERT_EQ(pair.size(), 2U);
    EXPECT_EQ(values_of(pair[0].toTensor()), ids);
    EXPECT_EQ(values_of(pair[1].toTensor()), ids);
    got.push_back(ids);
  }
  EXPECT_EQ(got, example_pass(examples));

  // A batch the dispatcher cannot cut is refused when the loader is chosen.
  auto count = [](std::vector<TensorMap> samples) { return samples.size(); };
  const std::string message = accelerate::testing::error_of(
      [&] { (void)accelerate::prepare_data_loader(Tokens(4), state, {}, dispatch, count); });
  EXPECT_NE(message.find("dispatch_batches = false"), std::string::npos) << message;
}

TEST(DictBatches, PreparedLoadersGatherDictsForMetrics) {
  for (const bool dispatch : {true, false}) {
    SCOPED_TRACE(dispatch ? "dispatch_batches" : "every rank loads");
    accelerate::AcceleratorOptions options;
    options.dataloader_config.dispatch_batches = dispatch;
    accelerate::Accelerator accelerator(options);
    auto loader = accelerator.prepare(accelerate::data_loader(Tokens(11), {.batch_size = 2}, token_collate()));
    static_assert(std::is_same_v<decltype(loader), std::shared_ptr<accelerate::BasicDataLoader<TensorMap>>>);
    Indices seen;
    for (const TensorMap& batch : *loader) {
      // Each rank pads to its own longest sample: pad_across_processes
      // with the same pad values lines the ranks up (a no-op when dispatched).
      TensorMap lined_up = batch;
      for (auto& [key, value] : lined_up) {
        if (value.dim() < 2) continue;
        value = accelerator.pad_across_processes(value, 1, key == "labels" ? kLabelPad : 0);
      }
      const TensorMap all = accelerator.gather_for_metrics(lined_up);
      const Indices mine = samples_of(all, lined_up.at("input_ids").size(1));
      seen.insert(seen.end(), mine.begin(), mine.end());
    }
    // Every sample once: the wrapped-around samples of the last batch dropped.
    std::sort(seen.begin(), seen.end());
    Indices all(11);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(seen, all);
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
