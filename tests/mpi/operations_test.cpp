// Nested-structure operations (accelerate/comm/operations.hpp) at 1, 2 and 4
// ranks. Every rank contributes data that depends on its rank; expected
// results are built here, independently, from the rank numbers.
#include "accelerate/comm/operations.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using c10::IValue;

class Operations : public ::testing::Test {
 protected:
  static acc::ProcessGroupOptions group_options(bool debug = false) {
    acc::ProcessGroupOptions options;
    options.timeout = std::chrono::seconds(60);
    options.debug_mode = debug;
    return options;
  }

  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::ProcessGroup::world(state, group_options());
  acc::ProcessGroup& g = *group;
  const int rank = group->rank();
  const int size = group->size();
};

// Runs `call`, which must throw E; checks that the message holds every part.
template <class E, class Call>
void expect_error(Call&& call, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& error) {
    const std::string message = error.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
    }
  } catch (const std::exception& error) {
    ADD_FAILURE() << "exception of the wrong type: " << error.what();
  }
}

at::Tensor full(at::IntArrayRef sizes, double value, at::ScalarType type = at::kFloat) {
  return at::full(sizes, value, at::TensorOptions().dtype(type));
}

c10::IValue string_dict(std::vector<std::pair<std::string, IValue>> items) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  for (auto& [key, value] : items) dict.insert(key, value);
  return dict;
}

c10::IValue any_list(std::vector<IValue> items) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (auto& item : items) list.push_back(item);
  return list;
}

// The group must still work after an error.
void expect_group_usable(acc::ProcessGroup& g) {
  const at::Tensor all = acc::gather(g, full({1}, g.rank()));
  ASSERT_EQ(all.size(0), g.size());
  for (int r = 0; r < g.size(); ++r) EXPECT_EQ(all[r].item<float>(), r);
}

// --- gather -----------------------------------------------------------------------------

TEST_F(Operations, GatherConcatenatesAlongDimZeroInRankOrder) {
  const at::Tensor mine = full({2, 3}, rank);
  const at::Tensor all = acc::gather(g, mine);
  static_assert(std::is_same_v<decltype(acc::gather(g, mine)), at::Tensor>);
  ASSERT_EQ(all.sizes(), at::IntArrayRef({2 * size, 3}));
  for (int r = 0; r < size; ++r) EXPECT_TRUE(at::equal(all.slice(0, 2 * r, 2 * r + 2), full({2, 3}, r))) << r;
  EXPECT_TRUE(at::equal(mine, full({2, 3}, rank)));  // input untouched
}

TEST_F(Operations, CollectivesAcceptNonContiguousTensors) {
  // Rank r's [3, 2] view of a [2, 3] tensor holding r*10 + column.
  const at::Tensor base = (at::arange(3).to(at::kFloat) + rank * 10).repeat({2, 1});
  const at::Tensor view = base.t();
  ASSERT_FALSE(view.is_contiguous());
  const at::Tensor all = acc::gather(g, view);
  ASSERT_EQ(all.sizes(), at::IntArrayRef({3 * size, 2}));
  for (int r = 0; r < size; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_TRUE(at::equal(all[3 * r + c], full({2}, r * 10 + c)));
  }
  const at::Tensor total = acc::reduce(g, view, "sum");
  const double ranks_sum = size * (size - 1) / 2.0;
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(at::equal(total[c], full({2}, ranks_sum * 10 + size * c)));
  const at::Tensor from_last = acc::broadcast(g, view, size - 1);
  EXPECT_TRUE(at::equal(from_last, ((at::arange(3).to(at::kFloat) + (size - 1) * 10).repeat({2, 1})).t()));
}

TEST_F(Operations, GatherHandlesFirstDimensionsThatDifferByRank) {
  const at::Tensor mine = full({rank + 1, 2}, rank * 10, at::kLong);
  const at::Tensor all = acc::gather(g, mine);
  std::vector<at::Tensor> parts;
  for (int r = 0; r < size; ++r) parts.push_back(full({r + 1, 2}, r * 10, at::kLong));
  const at::Tensor expected = at::cat(parts, 0);
  EXPECT_EQ(all.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(all, expected)) << all;

  // Rank r holds r rows: rank 0 contributes none.
  const at::Tensor some = acc::gather(g, full({rank, 3}, rank));
  ASSERT_EQ(some.size(0), size * (size - 1) / 2);
  std::vector<at::Tensor> blocks;
  for (int r = 0; r < size; ++r) blocks.push_back(full({r, 3}, r));
  EXPECT_TRUE(at::equal(some, at::cat(blocks, 0)));
}

TEST_F(Operations, GatherTreatsZeroDimTensorsAsOneRow) {
  const at::Tensor all = acc::gather(g, at::scalar_tensor(rank * 1.5, at::kDouble));
  ASSERT_EQ(all.dim(), 1);
  ASSERT_EQ(all.size(0), size);
  for (int r = 0; r < size; ++r) EXPECT_EQ(all[r].item<double>(), r * 1.5);
}

TEST_F(Operations, GatherKeepsNaturalContainerTypes) {
  using Batch = std::map<std::string, std::vector<at::Tensor>>;
  const Batch batch{{"a", {full({1}, rank), full({rank + 1, 2}, -rank)}}, {"b", {at::arange(2) + rank * 2}}};
  const Batch all = acc::gather(g, batch);
  static_assert(std::is_same_v<decltype(acc::gather(g, batch)), Batch>);
  ASSERT_EQ(all.size(), 2U);
  ASSERT_EQ(all.at("a").size(), 2U);
  std::vector<at::Tensor> first, second;
  for (int r = 0; r < size; ++r) {
    first.push_back(full({1}, r));
    second.push_back(full({r + 1, 2}, -r));
  }
  EXPECT_TRUE(at::equal(all.at("a")[0], at::cat(first)));
  EXPECT_TRUE(at::equal(all.at("a")[1], at::cat(second)));
  EXPECT_TRUE(at::equal(all.at("b")[0], at::arange(2 * size)));

  using Pair = std::tuple<at::Tensor, std::vector<at::Tensor>>;
  const Pair pair{full({1, 1}, rank), {full({2}, rank + 100)}};
  const Pair gathered = acc::gather(g, pair);
  ASSERT_EQ(std::get<1>(gathered).size(), 1U);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(std::get<0>(gathered)[r][0].item<float>(), r);
    EXPECT_EQ(std::get<1>(gathered)[0][2 * r].item<float>(), r + 100);
    EXPECT_EQ(std::get<1>(gathered)[0][2 * r + 1].item<float>(), r + 100);
  }
}

TEST_F(Operations, GatherWalksIValueDictsListsAndTuples) {
  const IValue data = string_dict({
      {"x", full({1, 2}, rank)},
      {"y", any_list({full({rank + 1}, rank), c10::ivalue::Tuple::create({full({1}, 2 * rank), full({1}, 3 * rank)})})},
  });
  const IValue all = acc::gather(g, data);
  ASSERT_TRUE(all.isGenericDict());
  const auto dict = all.toGenericDict();
  ASSERT_EQ(dict.size(), 2U);
  EXPECT_EQ(dict.begin()->key().toStringRef(), "x");  // insertion order kept
  const at::Tensor x = dict.at("x").toTensor();
  ASSERT_EQ(x.sizes(), at::IntArrayRef({size, 2}));
  const auto y = dict.at("y").toListRef();
  ASSERT_EQ(y.size(), 2U);
  ASSERT_TRUE(y[1].isTuple());
  const auto& pair = y[1].toTupleRef().elements();
  std::vector<at::Tensor> ragged;
  for (int r = 0; r < size; ++r) {
    EXPECT_TRUE(at::equal(x[r], full({2}, r)));
    EXPECT_EQ(pair[0].toTensor()[r].item<float>(), 2 * r);
    EXPECT_EQ(pair[1].toTensor()[r].item<float>(), 3 * r);
    ragged.push_back(full({r + 1}, r));
  }
  EXPECT_TRUE(at::equal(y[0].toTensor(), at::cat(ragged)));
}

TEST_F(Operations, GatherRejectsANonTensorLeafOnEveryRank) {
  const int bad = size - 1;
  const IValue labels = rank == bad ? IValue(std::string("oops")) : IValue(full({1}, 0));
  const IValue data = string_dict({{"input_ids", full({2}, rank)}, {"labels", any_list({full({1}, 1), full({1}, 2), labels})}});
  expect_error<acc::ConfigError>([&] { acc::gather(g, data); },
                                 {"gather", "rank " + std::to_string(bad), "data['labels'][2]", "str", "not a tensor"});
  expect_group_usable(g);
}

TEST_F(Operations, GatherRaisesCollectiveMismatchOnEveryRankForDifferentShapesOrKeys) {
  if (size == 1) GTEST_SKIP() << "needs two ranks";
  const at::Tensor mine = full({2, rank == 1 ? 4 : 3}, rank);
  expect_error<acc::CollectiveMismatch>([&] { acc::gather(g, mine); }, {"gather", "rank 1", "[*, 4]", "[*, 3]"});
  const std::map<std::string, at::Tensor> keyed{{rank == 1 ? "y" : "x", full({1}, rank)}};
  expect_error<acc::CollectiveMismatch>([&] { acc::gather(g, keyed); }, {"rank 1", "data['y']", "data['x']"});
  expect_group_usable(g);
}

// --- gather_object ------------------------------------------------------------------------

TEST_F(Operations, GatherObjectFlattensListsInRankOrder) {
  std::vector<std::string> mine;
  for (int i = 0; i <= rank; ++i) mine.push_back(std::to_string(rank) + ":" + std::to_string(i));
  const std::vector<std::string> all = acc::gather_object(g, mine);
  std::vector<std::string> expected;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i <= r; ++i) expected.push_back(std::to_string(r) + ":" + std::to_string(i));
  }
  EXPECT_EQ(all, expected);
}

TEST_F(Operations, GatherObjectGivesOneElementPerRankForNonLists) {
  const std::vector<int64_t> ranks = acc::gather_object(g, int64_t{rank * 7});
  const std::vector<std::map<std::string, int>> maps = acc::gather_object(g, std::map<std::string, int>{{"rank", rank}});
  const std::vector<IValue> tuples =
      acc::gather_object(g, IValue(c10::ivalue::Tuple::create({IValue(int64_t{rank}), IValue(std::string("t"))})));
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(size));
  ASSERT_EQ(maps.size(), static_cast<std::size_t>(size));
  ASSERT_EQ(tuples.size(), static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(ranks[r], r * 7);
    EXPECT_EQ(maps[r].at("rank"), r);
    EXPECT_EQ(tuples[r].toTupleRef().elements()[0].toInt(), r);
  }
}

// --- broadcast ----------------------------------------------------------------------------

TEST_F(Operations, BroadcastDeliversTheChosenProcessTensorsWithoutTouchingInputs) {
  using Data = std::map<std::string, std::vector<at::Tensor>>;
  const int root = size - 1;
  const Data mine{{"a", {full({2, 2}, rank)}}, {"b", {at::arange(3) + rank, full({1}, -rank, at::kDouble)}}};
  const Data got = acc::broadcast(g, mine, root);
  EXPECT_TRUE(at::equal(got.at("a")[0], full({2, 2}, root)));
  EXPECT_TRUE(at::equal(got.at("b")[0], at::arange(3) + root));
  EXPECT_TRUE(at::equal(got.at("b")[1], full({1}, -root, at::kDouble)));
  EXPECT_TRUE(at::equal(mine.at("a")[0], full({2, 2}, rank)));  // inputs untouched
  EXPECT_EQ(got.at("a")[0].is_same(mine.at("a")[0]), rank == root);

  // Default from_process is 0.
  const at::Tensor zero = acc::broadcast(g, full({3}, rank + 5));
  EXPECT_TRUE(at::equal(zero, full({3}, 5)));
}

TEST_F(Operations, BroadcastRejectsABadFromProcessOnEveryRank) {
  expect_error<acc::ConfigError>([&] { acc::broadcast(g, full({1}, rank), size); },
                                 {"broadcast", "from_process " + std::to_string(size), "not a rank"});
  expect_group_usable(g);
}

TEST_F(Operations, BroadcastRaisesCollectiveMismatchForDifferentShapes) {
  if (size == 1) GTEST_SKIP() << "needs two ranks";
  const at::Tensor mine = full({rank == size - 1 ? 3 : 2}, rank);
  expect_error<acc::CollectiveMismatch>([&] { acc::broadcast(g, mine); },
                                        {"broadcast", "rank " + std::to_string(size - 1), "[3]", "[2]"});
  expect_group_usable(g);
}

TEST_F(Operations, BroadcastObjectListReplacesEveryRanksList) {
  const int root = size - 1;
  std::vector<IValue> objects;
  if (rank == root) {
    objects = {IValue(std::string("from ") + std::to_string(rank)), IValue(int64_t{rank}), IValue(full({2}, rank))};
  } else {
    objects = {IValue(), IValue()};  // a different length: resized to the root's
  }
  std::vector<IValue>& same = acc::broadcast_object_list(g, objects, root);
  EXPECT_EQ(&same, &objects);
  ASSERT_EQ(objects.size(), 3U);
  EXPECT_EQ(objects[0].toStringRef(), "from " + std::to_string(root));
  EXPECT_EQ(objects[1].toInt(), root);
  EXPECT_TRUE(at::equal(objects[2].toTensor(), full({2}, root)));

  std::vector<std::string> names;
  if (rank == 0) names = {"alpha", "beta"};
  acc::broadcast_object_list(g, names);
  EXPECT_EQ(names, (std::vector<std::string>{"alpha", "beta"}));
}

TEST_F(Operations, BroadcastObjectListRejectsABadFromProcessOnEveryRank) {
  std::vector<IValue> objects{IValue(int64_t{rank})};
  expect_error<acc::ConfigError>([&] { acc::broadcast_object_list(g, objects, -1); },
                                 {"broadcast_object_list", "from_process -1"});
  expect_group_usable(g);
}

// --- reduce -------------------------------------------------------------------------------

TEST_F(Operations, ReduceSumsAveragesAndScales) {
  const double n = size;
  const at::Tensor mine = full({3}, rank + 1, at::kDouble);
  const double sum = n * (n + 1) / 2;
  EXPECT_TRUE(at::equal(acc::reduce(g, mine, "sum"), full({3}, sum, at::kDouble)));
  EXPECT_TRUE(at::equal(acc::reduce(g, mine), full({3}, sum / n, at::kDouble)));  // default "mean"
  EXPECT_TRUE(at::equal(acc::reduce(g, mine, "mean", 2.0), full({3}, 2 * sum / n, at::kDouble)));
  EXPECT_TRUE(at::equal(acc::reduce(g, mine, "sum", 0.5), full({3}, sum / 2, at::kDouble)));
  const at::Tensor none = acc::reduce(g, mine, "none");
  EXPECT_TRUE(none.is_same(mine));
  EXPECT_TRUE(at::equal(acc::reduce(g, mine, "none", 3.0), full({3}, 3.0 * (rank + 1), at::kDouble)));
  EXPECT_TRUE(at::equal(mine, full({3}, rank + 1, at::kDouble)));  // input untouched
}

TEST_F(Operations, ReduceWalksNestedStructuresAndKeepsIntegerDtypes) {
  using Data = std::map<std::string, std::tuple<at::Tensor, std::vector<at::Tensor>>>;
  const Data mine{{"loss", {full({1}, rank, at::kFloat), {full({2, 2}, rank, at::kLong), full({1}, 1, at::kInt)}}}};
  const Data total = acc::reduce(g, mine, "sum");
  const auto& [loss, counts] = total.at("loss");
  const double ranks_sum = size * (size - 1) / 2.0;
  EXPECT_TRUE(at::equal(loss, full({1}, ranks_sum)));
  EXPECT_EQ(counts[0].scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(counts[0], full({2, 2}, ranks_sum, at::kLong)));
  EXPECT_TRUE(at::equal(counts[1], full({1}, size, at::kInt)));

  // An integer sum multiplied by a scale becomes floating point.
  const at::Tensor halved = acc::reduce(g, full({1}, 1, at::kLong), "sum", 0.5);
  EXPECT_TRUE(at::isFloatingType(halved.scalar_type()));
  EXPECT_EQ(halved.item<double>(), size * 0.5);
}

TEST_F(Operations, ReduceMeanOfAnIntegerTensorIsAConfigErrorOnEveryRank) {
  const int bad = size - 1;
  const std::map<std::string, at::Tensor> data{{"count", full({1}, rank, rank == bad ? at::kLong : at::kFloat)}};
  expect_error<acc::ConfigError>([&] { acc::reduce(g, data); },
                                 {"reduce", "rank " + std::to_string(bad), "data['count']", "int64", "mean"});
  expect_group_usable(g);
}

TEST_F(Operations, ReduceRejectsAnUnknownReduction) {
  expect_error<acc::ConfigError>([&] { acc::reduce(g, full({1}, rank), "avg"); }, {"reduce", "\"avg\"", "\"mean\""});
  expect_group_usable(g);
}

TEST_F(Operations, ReduceRaisesCollectiveMismatchWhenRanksChooseDifferentReductions) {
  if (size == 1) GTEST_SKIP() << "needs two ranks";
  expect_error<acc::CollectiveMismatch>([&] { acc::reduce(g, full({1}, rank), rank == 0 ? "sum" : "none"); },
                                        {"reduce", "reduction=none", "reduction=sum"});
  expect_group_usable(g);
}

// --- pad_across_processes -----------------------------------------------------------------------

// Rank r's rows are r+1 rows of value r+1, padded to `size` rows with -1.
at::Tensor expected_padded(int r, int size, bool pad_first) {
  const at::Tensor data = full({r + 1, 2}, r + 1, at::kLong);
  const at::Tensor pad = full({size - r - 1, 2}, -1, at::kLong);
  return pad_first ? at::cat({pad, data}) : at::cat({data, pad});
}

TEST_F(Operations, PadAcrossProcessesPadsToTheLargestSizeLastOrFirst) {
  const at::Tensor mine = full({rank + 1, 2}, rank + 1, at::kLong);
  const at::Tensor last = acc::pad_across_processes(g, mine, 0, -1);
  const at::Tensor first = acc::pad_across_processes(g, mine, 0, -1, true);
  EXPECT_TRUE(at::equal(last, expected_padded(rank, size, false))) << last;
  EXPECT_TRUE(at::equal(first, expected_padded(rank, size, true))) << first;
  EXPECT_EQ(last.is_same(mine), rank == size - 1);  // already the largest: returned as is

  // Padded tensors gather into one block per rank.
  const at::Tensor all = acc::gather(g, last);
  ASSERT_EQ(all.sizes(), at::IntArrayRef({size * size, 2}));
  for (int r = 0; r < size; ++r) {
    EXPECT_TRUE(at::equal(all.slice(0, r * size, (r + 1) * size), expected_padded(r, size, false)));
  }
}

TEST_F(Operations, PadAcrossProcessesOtherDimensionsAndNesting) {
  using Data = std::tuple<at::Tensor, std::map<std::string, at::Tensor>>;
  const Data mine{full({2, rank + 1}, 1.0), {{"scalar", at::scalar_tensor(rank)}, {"rows", full({rank + 2}, 2.0)}}};
  const Data padded = acc::pad_across_processes(g, mine, -1, 0.5);
  const at::Tensor& matrix = std::get<0>(padded);
  ASSERT_EQ(matrix.sizes(), at::IntArrayRef({2, size}));
  EXPECT_TRUE(at::equal(matrix.slice(1, 0, rank + 1), full({2, rank + 1}, 1.0)));
  EXPECT_TRUE(at::equal(matrix.slice(1, rank + 1, size), full({2, size - rank - 1}, 0.5)));
  // A 0-d tensor has no dimension -1 to pad: kept.
  EXPECT_TRUE(std::get<1>(padded).at("scalar").is_same(std::get<1>(mine).at("scalar")));
  const at::Tensor rows = std::get<1>(padded).at("rows");
  ASSERT_EQ(rows.size(0), size + 1);
  EXPECT_TRUE(at::equal(rows.slice(0, rank + 2), full({size - rank - 1}, 0.5)));

  // dim beyond the tensors' dimensions: nothing to pad.
  const Data same = acc::pad_across_processes(g, mine, 5);
  EXPECT_TRUE(std::get<0>(same).is_same(std::get<0>(mine)));
}

TEST_F(Operations, PadAcrossProcessesRejectsNonTensorsAndMismatchedDimensions) {
  const int bad = size - 1;
  const IValue data = any_list({full({1}, rank), rank == bad ? IValue() : IValue(full({1}, rank))});
  expect_error<acc::ConfigError>([&] { acc::pad_across_processes(g, data); },
                                 {"pad_across_processes", "rank " + std::to_string(bad), "data[1]", "None"});
  if (size > 1) {
    const at::Tensor mine = rank == 1 ? full({1, 1, 1}, 0) : full({1, 1}, 0);
    expect_error<acc::CollectiveMismatch>([&] { acc::pad_across_processes(g, mine); },
                                          {"pad_across_processes", "rank 1", "3 dims", "2 dims"});
  }
  expect_group_usable(g);
}

// --- concatenate -------------------------------------------------------------------------------

TEST_F(Operations, ConcatenateMergesStructuresAlongADimension) {
  using Data = std::map<std::string, std::vector<at::Tensor>>;
  const std::vector<Data> parts{{{"x", {full({1, 2}, 1), full({1}, 10)}}}, {{"x", {full({2, 2}, 2), full({3}, 20)}}}};
  const Data merged = acc::concatenate(parts);
  EXPECT_TRUE(at::equal(merged.at("x")[0], at::cat({full({1, 2}, 1), full({2, 2}, 2)})));
  EXPECT_TRUE(at::equal(merged.at("x")[1], at::cat({full({1}, 10), full({3}, 20)})));

  const std::vector<at::Tensor> columns{full({2, 1}, 1), full({2, 3}, 2)};
  EXPECT_TRUE(at::equal(acc::concatenate(columns, 1), at::cat(columns, 1)));

  const std::vector<IValue> tuples{c10::ivalue::Tuple::create({full({1}, 1), IValue(full({1}, 2))}),
                                   c10::ivalue::Tuple::create({full({1}, 3), IValue(full({1}, 4))})};
  const IValue joined = acc::concatenate(tuples);
  ASSERT_TRUE(joined.isTuple());
  EXPECT_TRUE(at::equal(joined.toTupleRef().elements()[1].toTensor(), at::cat({full({1}, 2), full({1}, 4)})));
}

TEST_F(Operations, ConcatenateExplainsBadInput) {
  expect_error<acc::ConfigError>([] { acc::concatenate(std::vector<IValue>{}); }, {"concatenate", "empty"});
  const std::vector<IValue> missing{string_dict({{"x", full({1}, 0)}, {"y", full({1}, 0)}}),
                                    string_dict({{"x", full({1}, 0)}})};
  expect_error<acc::ConfigError>([&] { acc::concatenate(missing); }, {"data[1]", "no key ['y']"});
  const std::vector<IValue> strings{any_list({IValue(std::string("a"))}), any_list({IValue(std::string("b"))})};
  expect_error<acc::ConfigError>([&] { acc::concatenate(strings); }, {"data[0][0]", "str", "only tensors"});
  const std::vector<at::Tensor> shapes{full({1, 2}, 0), full({1, 3}, 0)};
  expect_error<acc::ConfigError>([&] { acc::concatenate(shapes); }, {"dim 0", "[1, 2]", "[1, 3]"});
}

// --- recursively_apply ---------------------------------------------------------------------------

TEST_F(Operations, RecursivelyApplyMapsTensorsAndKeepsTheContainerType) {
  const std::vector<at::Tensor> tensors{full({2}, 1), full({1}, 3)};
  const auto doubled = acc::recursively_apply([](const at::Tensor& t) { return t * 2; }, tensors);
  static_assert(std::is_same_v<decltype(doubled), const std::vector<at::Tensor>>);
  EXPECT_TRUE(at::equal(doubled[0], full({2}, 2)));
  EXPECT_TRUE(at::equal(doubled[1], full({1}, 6)));

  // A function returning something else gives an IValue of the same shape.
  const std::map<std::string, at::Tensor> named{{"a", full({4}, 0)}, {"b", full({2, 3}, 0)}};
  const IValue sizes = acc::recursively_apply([](const at::Tensor& t) { return t.numel(); }, named);
  EXPECT_EQ(sizes.toGenericDict().at("a").toInt(), 4);
  EXPECT_EQ(sizes.toGenericDict().at("b").toInt(), 6);

  // Other leaves are kept, or rejected with error_on_other_type.
  const std::tuple<at::Tensor, std::string> mixed{full({1}, 1), "text"};
  const auto kept = acc::recursively_apply([](const at::Tensor& t) { return t + 1; }, mixed);
  EXPECT_EQ(std::get<1>(kept), "text");
  EXPECT_TRUE(at::equal(std::get<0>(kept), full({1}, 2)));
  expect_error<acc::ConfigError>(
      [&] { acc::recursively_apply([](const at::Tensor& t) { return t; }, mixed, /*error_on_other_type=*/true); },
      {"recursively_apply", "data[1]", "str"});
}

TEST_F(Operations, RecursivelyApplyWithACustomTestType) {
  const at::Tensor tensor = full({1}, 0);
  const IValue data = any_list({IValue(std::string("ab")), tensor, string_dict({{"k", IValue(std::string("cd"))}})});
  acc::ApplyOptions options;
  options.test_type = [](const IValue& leaf) { return leaf.isString(); };
  const IValue upper = acc::recursively_apply(
      [](const IValue& leaf) {
        std::string text = leaf.toStringRef();
        for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return IValue(text);
      },
      data, options);
  const auto items = upper.toListRef();
  EXPECT_EQ(items[0].toStringRef(), "AB");
  EXPECT_TRUE(items[1].toTensor().is_same(tensor));
  EXPECT_EQ(items[2].toGenericDict().at("k").toStringRef(), "CD");
  options.error_on_other_type = true;
  expect_error<acc::ConfigError>([&] { acc::recursively_apply([](const IValue& v) { return v; }, data, options); },
                                 {"data[1]", "Tensor", "test_type"});
}

// --- send_to_device ------------------------------------------------------------------------------

TEST_F(Operations, SendToDeviceMovesTensorsExceptUnderSkippedKeys) {
  const at::Tensor x = full({2}, 1), labels = full({2}, 2), inner_labels = full({1}, 3), y = full({1}, 4);
  const IValue data = string_dict({{"x", x}, {"labels", labels}, {"nested", string_dict({{"labels", inner_labels}, {"y", y}})}});
  // The meta device stands in for an accelerator: a real move on any machine.
  const IValue moved = acc::send_to_device(data, c10::Device(c10::kMeta), /*non_blocking=*/true, {"labels"});
  const auto dict = moved.toGenericDict();
  EXPECT_TRUE(dict.at("x").toTensor().is_meta());
  EXPECT_TRUE(dict.at("labels").toTensor().is_same(labels));
  const auto nested = dict.at("nested").toGenericDict();
  EXPECT_TRUE(nested.at("labels").toTensor().is_same(inner_labels));
  EXPECT_TRUE(nested.at("y").toTensor().is_meta());
  EXPECT_EQ(nested.at("y").toTensor().sizes(), y.sizes());

  // Already there: the same tensors come back.
  const std::vector<at::Tensor> local{x, y};
  const std::vector<at::Tensor> same = acc::send_to_device(local, c10::Device(c10::kCPU));
  EXPECT_TRUE(same[0].is_same(x));
  EXPECT_TRUE(same[1].is_same(y));
}

// --- slice_tensors, convert_to_fp32, listify, find_batch_size -------------------------------------------

TEST_F(Operations, SliceTensorsSlicesDimZeroLikePython) {
  const IValue data = string_dict({{"a", at::arange(10)}, {"b", any_list({at::arange(12).reshape({6, 2})})}, {"s", IValue(std::string("text"))}});
  const auto sliced = acc::slice_tensors(data, 2, 5).toGenericDict();
  EXPECT_TRUE(at::equal(sliced.at("a").toTensor(), at::arange(2, 5)));
  EXPECT_TRUE(at::equal(sliced.at("b").toListRef()[0].toTensor(), at::arange(4, 10).reshape({3, 2})));
  EXPECT_EQ(sliced.at("s").toStringRef(), "text");

  const at::Tensor tail = acc::slice_tensors(at::arange(10), -3, std::nullopt);
  EXPECT_TRUE(at::equal(tail, at::arange(7, 10)));
  const at::Tensor even = acc::slice_tensors(at::arange(10), std::nullopt, std::nullopt, 2);
  EXPECT_TRUE(at::equal(even, at::arange(0, 10, 2)));

  const std::map<std::string, at::Tensor> scalar{{"c", at::scalar_tensor(1)}};
  expect_error<acc::ConfigError>([&] { acc::slice_tensors(scalar, 0, 1); }, {"slice_tensors", "data['c']", "0-d"});
  expect_error<acc::ConfigError>([] { acc::slice_tensors(at::arange(3), 0, 1, 0); }, {"step 0"});
}

TEST_F(Operations, ConvertToFp32ConvertsHalfAndBfloat16Only) {
  const at::Tensor half = full({2}, 1.5, at::kHalf), bf16 = full({2}, 2.5, at::kBFloat16);
  const at::Tensor dbl = full({2}, 3.5, at::kDouble), lng = full({2}, 4, at::kLong);
  const std::map<std::string, at::Tensor> data{{"h", half}, {"b", bf16}, {"d", dbl}, {"i", lng}};
  const auto converted = acc::convert_to_fp32(data);
  EXPECT_EQ(converted.at("h").scalar_type(), at::kFloat);
  EXPECT_EQ(converted.at("b").scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(converted.at("h"), full({2}, 1.5)));
  EXPECT_TRUE(at::equal(converted.at("b"), full({2}, 2.5)));
  EXPECT_TRUE(converted.at("d").is_same(dbl));
  EXPECT_TRUE(converted.at("i").is_same(lng));
  const IValue text = acc::convert_to_fp32(IValue(std::string("kept")));
  EXPECT_EQ(text.toStringRef(), "kept");
}

TEST_F(Operations, ListifyTurnsTensorsIntoNestedLists) {
  const at::Tensor ints = at::arange(1, 7).reshape({2, 3});
  const IValue rows = acc::listify(ints);
  ASSERT_TRUE(rows.isList());
  ASSERT_EQ(rows.toListRef().size(), 2U);
  EXPECT_EQ(rows.toListRef()[0].toIntVector(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(rows.toListRef()[1].toIntVector(), (std::vector<int64_t>{4, 5, 6}));

  const std::map<std::string, IValue> data{{"f", full({2}, 0.5)},
                                           {"b", full({1}, 1.5, at::kBFloat16)},
                                           {"t", at::tensor(std::vector<int64_t>{1, 0}).to(at::kBool)},
                                           {"s", at::scalar_tensor(7, at::kLong)},
                                           {"e", full({0, 3}, 0)},
                                           {"name", IValue(std::string("x"))}};
  const auto lists = acc::listify(data).toGenericDict();
  EXPECT_EQ(lists.at("f").toDoubleVector(), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(lists.at("b").toDoubleVector(), (std::vector<double>{1.5}));
  EXPECT_EQ(lists.at("t").toBoolList().get(0), true);
  EXPECT_EQ(lists.at("t").toBoolList().get(1), false);
  EXPECT_EQ(lists.at("s").toInt(), 7);  // 0-d: a number
  EXPECT_EQ(lists.at("e").toListRef().size(), 0U);
  EXPECT_EQ(lists.at("name").toStringRef(), "x");
}

TEST_F(Operations, FindBatchSizeReadsTheFirstTensor) {
  EXPECT_EQ(acc::find_batch_size(full({5, 2}, 0)), 5);
  const std::map<std::string, std::vector<at::Tensor>> batch{{"a", {full({3}, 0)}}, {"b", {full({9}, 0)}}};
  EXPECT_EQ(acc::find_batch_size(batch), 3);
  // Depth first, in insertion order, past leaves that are not tensors.
  const IValue data = string_dict({{"text", IValue(std::string("hello"))}, {"ids", any_list({IValue(), full({4, 2}, 0)})}});
  EXPECT_EQ(acc::find_batch_size(data), 4);
  expect_error<acc::ConfigError>([] { acc::find_batch_size(std::vector<std::string>{"a"}); },
                                 {"find_batch_size", "no tensor"});
  const std::tuple<at::Tensor, at::Tensor> scalar_first{at::scalar_tensor(1), full({2}, 0)};
  expect_error<acc::ConfigError>([&] { acc::find_batch_size(scalar_first); }, {"data[0]", "0-d"});
}

TEST_F(Operations, FromIValueNamesBothTypesWhenTheShapeDiffers) {
  expect_error<acc::ConfigError>([] { acc::from_ivalue<std::vector<at::Tensor>>(IValue(std::string("x"))); },
                                 {"str", "std::vector"});
  expect_error<acc::ConfigError>([] { acc::from_ivalue<std::tuple<at::Tensor>>(any_list({})); }, {"std::tuple"});
}

// --- with the group's debug checks on ---------------------------------------------------------------

TEST_F(Operations, CollectivesPassTheDebugModeChecks) {
  auto checked = acc::ProcessGroup::world(state, group_options(/*debug=*/true));
  ASSERT_TRUE(checked->debug_mode());
  const std::map<std::string, at::Tensor> data{{"rows", full({rank + 1, 2}, rank)}};
  const auto all = acc::gather(*checked, data);
  EXPECT_EQ(all.at("rows").size(0), size * (size + 1) / 2);
  const auto padded = acc::pad_across_processes(*checked, data);
  EXPECT_EQ(padded.at("rows").size(0), size);
  const auto total = acc::reduce(*checked, padded, "sum");
  float expected_total = 0;  // rank r holds (r+1) x 2 values r, padded with zeros
  for (int r = 0; r < size; ++r) expected_total += 2.0F * static_cast<float>((r + 1) * r);
  EXPECT_EQ(total.at("rows").sum().item<float>(), expected_total);
  const auto from_last = acc::broadcast(*checked, data.at("rows").sum(), size - 1);
  EXPECT_EQ(from_last.item<float>(), 2.0F * size * (size - 1));
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
