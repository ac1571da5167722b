// Batches other than data/target examples, at 1, 2 and 4 ranks: maps,
// tuples, c10::Dict and IValue dicts collated field by field (torch's
// default_collate), a collate function of the user's, samplers and batch
// samplers deciding the order, and the same loaders through
// Accelerator::prepare. The expected batches come from BatchSamplerShard
// (tested on its own in tests/unit/batch_sampler_shard_test.cpp) over the
// order the options describe.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/collate.hpp"
#include "accelerate/data/data_loader_dispatcher.hpp"
#include "accelerate/data/data_loader_shard.hpp"
#include "accelerate/data/prepare_data_loader.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/accelerator.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::BatchSamplerShard;
using accelerate::DataLoaderOptions;
using accelerate::DataLoaderShard;
using accelerate::State;
using Indices = std::vector<std::int64_t>;
using TensorMap = std::map<std::string, torch::Tensor>;

std::vector<std::int64_t> values_of(const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.to(torch::kCPU).to(torch::kInt64).contiguous();
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

/// Sample i: {"image": [i, i + 0.5] (float), "label": i (int64)}; sample
/// `odd` (if any) has an image of three values instead of two.
class MapDataset {
 public:
  explicit MapDataset(std::size_t n, std::int64_t odd = -1) : n_(n), odd_(odd) {}
  TensorMap get(std::size_t index) const {
    const auto i = static_cast<float>(index);
    torch::Tensor image =
        static_cast<std::int64_t>(index) == odd_ ? torch::tensor({i, i, i}) : torch::tensor({i, i + 0.5F});
    return {{"image", image}, {"label", torch::tensor(static_cast<std::int64_t>(index))}};
  }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
  std::int64_t odd_;
};

/// Sample i: (i as a 1-element tensor, {"twice": 2i}, (i, -i) as a pair).
class TupleDataset {
 public:
  explicit TupleDataset(std::size_t n) : n_(n) {}
  std::tuple<torch::Tensor, TensorMap, std::pair<torch::Tensor, torch::Tensor>> get(std::size_t index) const {
    const auto i = static_cast<std::int64_t>(index);
    return {torch::tensor({i}), TensorMap{{"twice", torch::tensor(2 * i)}},
            std::pair{torch::tensor(i), torch::tensor(-i)}};
  }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
};

/// Sample i as an IValue dict: {"x": [i, i] (float), "id": i (int), "name": "s<i>"}.
class IValueDataset {
 public:
  explicit IValueDataset(std::size_t n) : n_(n) {}
  c10::IValue get(std::size_t index) const {
    c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
    const auto i = static_cast<std::int64_t>(index);
    dict.insert("x", torch::full({2}, static_cast<double>(i)));
    dict.insert("id", i);
    dict.insert("name", "s" + std::to_string(i));
    return dict;
  }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
};

/// Sample i as a typed dict {"value": i}.
class TypedDictDataset {
 public:
  explicit TypedDictDataset(std::size_t n) : n_(n) {}
  c10::Dict<std::string, torch::Tensor> get(std::size_t index) const {
    c10::Dict<std::string, torch::Tensor> dict;
    dict.insert("value", torch::tensor(static_cast<std::int64_t>(index)));
    return dict;
  }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
};

/// Sample i: data [i], target i.
class ExampleDataset {
 public:
  explicit ExampleDataset(std::size_t n) : n_(n) {}
  torch::data::Example<> get(std::size_t index) const {
    const auto i = static_cast<std::int64_t>(index);
    return {torch::tensor({i}), torch::tensor(i)};
  }
  [[nodiscard]] std::optional<std::size_t> size() const { return n_; }

 private:
  std::size_t n_;
};

/// This rank's expected batches of `order`.
std::vector<Indices> expected_batches(const State& state, Indices order, std::int64_t batch_size) {
  return BatchSamplerShard(std::move(order), batch_size, false,
                           {.num_processes = state.num_processes(), .process_index = state.process_index()})
      .batches();
}

Indices iota(std::int64_t n) {
  Indices order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  return order;
}

TEST(StructuredBatches, MapSamplesStackEveryKey) {
  const State state;
  DataLoaderShard loader(MapDataset(10), state, {.batch_size = 3});
  static_assert(std::is_same_v<decltype(loader)::Batch, TensorMap>);
  const std::vector<Indices> expected = expected_batches(state, iota(10), 3);
  std::size_t k = 0;
  for (const TensorMap& batch : loader) {
    ASSERT_LT(k, expected.size());
    ASSERT_EQ(batch.size(), 2U);
    EXPECT_EQ(values_of(batch.at("label")), expected[k]);
    const torch::Tensor& image = batch.at("image");
    ASSERT_EQ(image.sizes(), (std::vector<std::int64_t>{static_cast<std::int64_t>(expected[k].size()), 2}));
    for (std::size_t row = 0; row < expected[k].size(); ++row) {
      const auto i = static_cast<float>(expected[k][row]);
      EXPECT_TRUE(torch::equal(image[static_cast<std::int64_t>(row)], torch::tensor({i, i + 0.5F})));
    }
    ++k;
  }
  EXPECT_EQ(k, expected.size());
}

TEST(StructuredBatches, TuplesAndPairsCollateElementByElement) {
  const State state;
  DataLoaderShard loader(TupleDataset(7), state, {.batch_size = 2});
  const std::vector<Indices> expected = expected_batches(state, iota(7), 2);
  std::size_t k = 0;
  for (const auto& [ones, map, pair] : loader) {
    ASSERT_LT(k, expected.size());
    const auto b = static_cast<std::int64_t>(expected[k].size());
    EXPECT_EQ(ones.sizes(), (std::vector<std::int64_t>{b, 1}));
    EXPECT_EQ(values_of(ones), expected[k]);
    Indices twice;
    Indices negated;
    for (const std::int64_t i : expected[k]) {
      twice.push_back(2 * i);
      negated.push_back(-i);
    }
    EXPECT_EQ(values_of(map.at("twice")), twice);
    EXPECT_EQ(values_of(pair.first), expected[k]);
    EXPECT_EQ(values_of(pair.second), negated);
    ++k;
  }
  EXPECT_EQ(k, expected.size());
}

TEST(StructuredBatches, IValueDictsCollateTensorsNumbersAndStrings) {
  const State state;
  DataLoaderShard loader(IValueDataset(5), state, {.batch_size = 2});
  const std::vector<Indices> expected = expected_batches(state, iota(5), 2);
  std::size_t k = 0;
  for (const c10::IValue& batch : loader) {
    ASSERT_LT(k, expected.size());
    ASSERT_TRUE(batch.isGenericDict());
    const c10::impl::GenericDict dict = batch.toGenericDict();
    const torch::Tensor x = dict.at("x").toTensor();
    const auto b = static_cast<std::int64_t>(expected[k].size());
    EXPECT_EQ(x.sizes(), (std::vector<std::int64_t>{b, 2}));
    EXPECT_EQ(values_of(x.select(1, 0)), expected[k]);
    const torch::Tensor id = dict.at("id").toTensor();
    EXPECT_EQ(id.scalar_type(), torch::kInt64);
    EXPECT_EQ(values_of(id), expected[k]);
    const c10::List<c10::IValue> names = dict.at("name").toList();
    ASSERT_EQ(names.size(), expected[k].size());
    for (std::size_t row = 0; row < names.size(); ++row) {
      EXPECT_EQ(names.get(row).toStringRef(), "s" + std::to_string(expected[k][row]));
    }
    ++k;
  }
  EXPECT_EQ(k, expected.size());

  DataLoaderShard typed(TypedDictDataset(5), state, {.batch_size = 2});
  k = 0;
  for (const c10::Dict<std::string, torch::Tensor>& batch : typed) {
    ASSERT_LT(k, expected.size());
    EXPECT_EQ(values_of(batch.at("value")), expected[k]);
    ++k;
  }
  EXPECT_EQ(k, expected.size());
}

TEST(StructuredBatches, MismatchedSamplesNameTheSampleAndTheField) {
  // Sample 4's image has three values: with batches of 5 on one process it
  // is sample 4 of the first batch.
  DataLoaderShard loader(MapDataset(10, 4), accelerate::DataLoaderPlacement{}, {.batch_size = 5});
  try {
    (void)loader.begin();
    FAIL() << "a batch of samples with different shapes was stacked";
  } catch (const accelerate::ConfigError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("sample 4 of the batch has ['image'] [3] Float, but sample 0 has [2] Float"),
              std::string::npos)
        << message;
  }

  std::vector<TensorMap> different_keys{{{"a", torch::zeros({1})}}, {{"b", torch::zeros({1})}}};
  try {
    (void)accelerate::DefaultCollate{}(different_keys);
    FAIL() << "maps with different keys were collated";
  } catch (const accelerate::ConfigError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("sample 1 of the batch has keys 'b', but sample 0 has keys 'a'"), std::string::npos)
        << message;
  }

  std::vector<c10::IValue> mixed{c10::IValue(torch::zeros({1})), c10::IValue(std::int64_t{3})};
  try {
    (void)accelerate::DefaultCollate{}(mixed);
    FAIL() << "a tensor and an int were collated";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("sample 1 of the batch has an int, but sample 0 has a tensor"),
              std::string::npos)
        << error.what();
  }
}

/// A batch type of the user's own, from a collate function.
struct IdBatch {
  std::vector<std::int64_t> ids;
  torch::Tensor sum;
};

IdBatch collect_ids(std::vector<torch::data::Example<>> samples) {
  IdBatch batch{{}, torch::zeros({1}, torch::kInt64)};
  for (const auto& sample : samples) {
    batch.ids.push_back(sample.target.item<std::int64_t>());
    batch.sum += sample.data;
  }
  return batch;
}

TEST(StructuredBatches, ACollateFunctionMakesAnyBatch) {
  const State state;
  DataLoaderShard loader(ExampleDataset(9), state, {.batch_size = 4}, {}, &collect_ids);
  static_assert(std::is_same_v<decltype(loader)::Batch, IdBatch>);
  const std::vector<Indices> expected = expected_batches(state, iota(9), 4);
  std::size_t k = 0;
  for (const IdBatch& batch : loader) {
    ASSERT_LT(k, expected.size());
    EXPECT_EQ(batch.ids, expected[k]);
    std::int64_t sum = 0;
    for (const std::int64_t i : expected[k]) sum += i;
    EXPECT_EQ(batch.sum.item<std::int64_t>(), sum);
    ++k;
  }
  EXPECT_EQ(k, expected.size());
}

TEST(StructuredBatches, PreparedThroughTheAccelerator) {
  accelerate::Accelerator accelerator;
  const State& state = accelerator.state();
  auto maps = accelerator.prepare(accelerate::data_loader(MapDataset(6), {.batch_size = 2}));
  static_assert(std::is_same_v<decltype(maps), std::shared_ptr<accelerate::BasicDataLoader<TensorMap>>>);
  const std::vector<Indices> expected = expected_batches(state, iota(6), 2);
  std::size_t k = 0;
  for (const TensorMap& batch : *maps) {
    ASSERT_LT(k, expected.size());
    EXPECT_EQ(values_of(batch.at("label")), expected[k]);
    // The accelerator's gradient state follows a loader of any batch type.
    EXPECT_EQ(accelerator.gradient_state().end_of_dataloader(), k + 1 == expected.size());
    ++k;
  }
  EXPECT_EQ(k, expected.size());

  auto ids = accelerator.prepare(accelerate::data_loader(ExampleDataset(6), {.batch_size = 3}, &collect_ids));
  k = 0;
  const std::vector<Indices> expected_ids = expected_batches(state, iota(6), 3);
  for (const IdBatch& batch : *ids) {
    ASSERT_LT(k, expected_ids.size());
    EXPECT_EQ(batch.ids, expected_ids[k]);
    ++k;
  }
  EXPECT_EQ(k, expected_ids.size());

  // The dispatcher scatters batches of tensors (maps of them too), not a
  // collate function's own type.
  accelerate::DataLoaderConfiguration dispatch{.dispatch_batches = true};
  EXPECT_THROW((void)accelerate::prepare_data_loader(ExampleDataset(4), state, {}, dispatch, &collect_ids),
               accelerate::ConfigError);
}

TEST(StructuredBatches, ASamplerDecidesTheOrderOfEveryEpoch) {
  const State state;
  // Epoch e visits 0 … 7 rotated by e, backwards; the seed is the data seed.
  std::vector<std::uint64_t> seeds;
  auto sampler = [&seeds](std::int64_t epoch, std::uint64_t seed) {
    seeds.push_back(seed);
    Indices order;
    for (std::int64_t i = 7; i >= 0; --i) order.push_back((i + epoch) % 8);
    return order;
  };
  DataLoaderShard loader(ExampleDataset(10), state, {.batch_size = 3, .sampler = sampler}, {.data_seed = 99});
  // The sampler's length, not the dataset's, is the loader's.
  EXPECT_EQ(loader.total_dataset_length(), 8);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    Indices order;
    for (std::int64_t i = 7; i >= 0; --i) order.push_back((i + epoch) % 8);
    const std::vector<Indices> expected = expected_batches(state, order, 3);
    std::vector<Indices> got;
    for (const auto& batch : loader) got.push_back(values_of(batch.target));
    EXPECT_EQ(got, expected) << "epoch " << epoch;
  }
  ASSERT_FALSE(seeds.empty());
  for (const std::uint64_t seed : seeds) EXPECT_EQ(seed, 99U);

  // An index outside the dataset (epoch 0 is read when the loader is
  // built), and an epoch of another length.
  try {
    DataLoaderShard outside(ExampleDataset(4), state, {.sampler = [](std::int64_t, std::uint64_t) {
                              return Indices{0, 4};
                            }});
    FAIL() << "an index past the dataset was accepted";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("sampler (epoch 0): returned the index 4 at position 1, but the dataset "
                        "has 4 samples"),
              std::string::npos)
        << error.what();
  }
  DataLoaderShard shrinking(ExampleDataset(4), state, {.sampler = [](std::int64_t epoch, std::uint64_t) {
                              return epoch == 0 ? Indices{0, 1, 2} : Indices{0, 1};
                            }});
  for (const auto& batch : shrinking) (void)batch;
  EXPECT_THROW((void)shrinking.begin(), accelerate::ConfigError);

  EXPECT_THROW(DataLoaderShard(ExampleDataset(4), state, {.shuffle = true, .sampler = sampler}),
               accelerate::ConfigError);
}

TEST(StructuredBatches, ABatchSamplerDecidesTheBatches) {
  const State state;
  const int processes = state.num_processes();
  const int rank = state.process_index();
  // Full batches of 3 and a short last one: even_batches completes the last round.
  const std::vector<Indices> uniform{{9, 8, 7}, {6, 5, 4}, {3, 2, 1}, {0}};
  DataLoaderShard loader(ExampleDataset(10), state,
                         {.batch_sampler = [&](std::int64_t, std::uint64_t) { return uniform; }});
  const std::vector<Indices> expected =
      BatchSamplerShard::from_batches(uniform, 3, false, {.num_processes = processes, .process_index = rank}).batches();
  std::vector<Indices> got;
  for (const auto& batch : loader) got.push_back(values_of(batch.target));
  EXPECT_EQ(got, expected);

  // Batches of varying size are dealt out whole, in turn (even_batches false),
  // and a saved position resumes with exactly the batches not yet handed out.
  const std::vector<Indices> varying{{0}, {1, 2, 3}, {4, 5}, {6}, {7, 8, 9}, {2, 4}};
  auto sampler = [&](std::int64_t, std::uint64_t) { return varying; };
  const accelerate::DataLoaderConfiguration uneven{.even_batches = false};
  DataLoaderShard whole(ExampleDataset(10), state, {.batch_sampler = sampler}, uneven);
  std::vector<Indices> all;
  for (const auto& batch : whole) all.push_back(values_of(batch.target));
  std::vector<Indices> dealt;
  for (std::size_t k = static_cast<std::size_t>(rank); k < varying.size(); k += static_cast<std::size_t>(processes)) {
    dealt.push_back(varying[k]);
  }
  EXPECT_EQ(all, dealt);
  if (all.size() >= 2) {
    DataLoaderShard first(ExampleDataset(10), state, {.batch_sampler = sampler}, uneven);
    auto it = first.begin();
    EXPECT_EQ(values_of(it->target), all[0]);
    const auto saved = first.state_dict();
    DataLoaderShard resumed(ExampleDataset(10), state, {.batch_sampler = sampler}, uneven);
    resumed.load_state_dict(saved);
    std::vector<Indices> rest;
    for (const auto& batch : resumed) rest.push_back(values_of(batch.target));
    EXPECT_EQ(rest, std::vector<Indices>(all.begin() + 1, all.end()));
  }

  // Varying batches with even_batches, and a batch sampler with a batch size.
  EXPECT_THROW(DataLoaderShard(ExampleDataset(10), state, {.batch_sampler = sampler}), accelerate::ConfigError);
  EXPECT_THROW(DataLoaderShard(ExampleDataset(10), state,
                               {.batch_size = 4,
                                .batch_sampler = [&](std::int64_t, std::uint64_t) { return uniform; }}),
               accelerate::ConfigError);
  // The dispatcher takes neither.
  EXPECT_THROW(accelerate::DataLoaderDispatcher(ExampleDataset(10), state, {.batch_sampler = sampler}),
               accelerate::ConfigError);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
