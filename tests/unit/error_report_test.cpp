// The pure parts of abort_all's one report per error: normalising a message
// (the rank prefixes of its own rank cut out) and writing rank lists.
#include <gtest/gtest.h>

#include <string>

#include "runtime/error_report.hpp"

namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::detail::format_rank_list;
using accelerate::detail::kRankMark;
using accelerate::detail::normalise_error_message;

const std::string mark(1, kRankMark);

TEST(ErrorReportRanks, WritesRuns) {
  EXPECT_EQ(format_rank_list({}), "");
  EXPECT_EQ(format_rank_list({4}), "4");
  EXPECT_EQ(format_rank_list({0, 1}), "0-1");
  EXPECT_EQ(format_rank_list({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(format_rank_list({7, 0, 6, 2, 5}), "0,2,5-7");
  EXPECT_EQ(format_rank_list({3, 3, 1}), "1,3");
  std::vector<int> all(512);
  for (int r = 0; r < 512; ++r) all[static_cast<std::size_t>(r)] = r;
  EXPECT_EQ(format_rank_list(all), "0-511");
}

TEST(ErrorReportNormalise, CutsEveryPrefixOfItsOwnRank) {
  // As jobs/train builds its text: the handler's name, then the error's own prefix.
  EXPECT_EQ(normalise_error_message("train: [rank 1/2 on vm] load_state: no such file", 1, 2),
            "train: " + mark + " load_state: no such file");
  EXPECT_EQ(normalise_error_message("[rank 3/4 on node01] a [rank 3/4 on node01] b\n[rank 3/4] c", 3, 4),
            mark + " a " + mark + " b\n" + mark + " c");
  // Two ranks' texts that differ only in their prefixes become one.
  EXPECT_EQ(normalise_error_message("x: [rank 0/4 on a] same", 0, 4),
            normalise_error_message("x: [rank 2/4 on b] same", 2, 4));
}

TEST(ErrorReportNormalise, KeepsWhatIsNotItsOwnPrefix) {
  // Another rank named in the message, a longer number, a prefix left open.
  EXPECT_EQ(normalise_error_message("rank 0 saw [rank 3/4 on x] fail", 0, 4), "rank 0 saw [rank 3/4 on x] fail");
  EXPECT_EQ(normalise_error_message("[rank 1/20 on x] y", 1, 2), "[rank 1/20 on x] y");
  EXPECT_EQ(normalise_error_message("[rank 1/2 on x", 1, 2), "[rank 1/2 on x");
  EXPECT_EQ(normalise_error_message("[rank 1/2 on ] y", 1, 2), "[rank 1/2 on ] y");
  EXPECT_EQ(normalise_error_message("[rank 1/2 on x\n] y", 1, 2), "[rank 1/2 on x\n] y");
  EXPECT_EQ(normalise_error_message("", 0, 1), "");
  EXPECT_EQ(normalise_error_message("no prefix at all", 0, 1), "no prefix at all");
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
