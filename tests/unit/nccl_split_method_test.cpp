// Which road a sub-group's NCCL communicator takes: ncclCommSplit only when
// the NCCL compiled against and the NCCL loaded at run time both have it.
#include <gtest/gtest.h>

#include "comm/nccl/nccl_split_method.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::detail::choose_nccl_split_method;
using accelerate::detail::NcclSplitMethod;

// NCCL's version code since 2.9: major * 10000 + minor * 100 + patch.
constexpr int version(int major, int minor, int patch) { return major * 10000 + minor * 100 + patch; }

TEST(NcclSplitMethod, SplitsWhenHeaderAndLibraryAreBoth218OrNewer) {
  EXPECT_EQ(choose_nccl_split_method(version(2, 18, 0), version(2, 18, 0)), NcclSplitMethod::CommSplit);
  EXPECT_EQ(choose_nccl_split_method(version(2, 28, 9), version(2, 28, 9)), NcclSplitMethod::CommSplit);
  EXPECT_EQ(choose_nccl_split_method(version(2, 18, 1), version(2, 21, 5)), NcclSplitMethod::CommSplit);
  EXPECT_EQ(choose_nccl_split_method(version(2, 28, 9), version(2, 18, 3)), NcclSplitMethod::CommSplit);
}

TEST(NcclSplitMethod, BootstrapsWhenTheHeaderIsOlder) {
  // An nccl.h without ncclCommSplit, even if a newer library is loaded.
  EXPECT_EQ(choose_nccl_split_method(version(2, 17, 1), version(2, 28, 9)), NcclSplitMethod::MpiBootstrap);
  EXPECT_EQ(choose_nccl_split_method(version(2, 13, 4), version(2, 18, 0)), NcclSplitMethod::MpiBootstrap);
}

TEST(NcclSplitMethod, BootstrapsWhenTheLibraryLoadedAtRunTimeIsOlder) {
  // Built against 2.28, but an older libnccl.so.2 comes first at run time.
  EXPECT_EQ(choose_nccl_split_method(version(2, 28, 9), version(2, 17, 1)), NcclSplitMethod::MpiBootstrap);
  EXPECT_EQ(choose_nccl_split_method(version(2, 18, 0), version(2, 14, 3)), NcclSplitMethod::MpiBootstrap);
}

TEST(NcclSplitMethod, BootstrapsWhenTheRuntimeVersionIsUnknown) {
  EXPECT_EQ(choose_nccl_split_method(version(2, 28, 9), 0), NcclSplitMethod::MpiBootstrap);
  EXPECT_EQ(choose_nccl_split_method(version(2, 28, 9), -1), NcclSplitMethod::MpiBootstrap);
}

TEST(NcclSplitMethod, OldStyleVersionCodesAreOlder) {
  // Before 2.9 the code was major * 1000 + minor * 100 + patch (2.8.4 is 2804).
  EXPECT_EQ(choose_nccl_split_method(2804, 2804), NcclSplitMethod::MpiBootstrap);
  EXPECT_EQ(choose_nccl_split_method(version(2, 28, 9), 2804), NcclSplitMethod::MpiBootstrap);
}

TEST(NcclSplitMethod, IsUsableAtCompileTimeAndNamesItsChoice) {
  static_assert(choose_nccl_split_method(version(2, 18, 0), version(2, 18, 0)) == NcclSplitMethod::CommSplit);
  static_assert(choose_nccl_split_method(version(2, 17, 99), version(2, 18, 0)) == NcclSplitMethod::MpiBootstrap);
  EXPECT_STREQ(accelerate::detail::to_string(NcclSplitMethod::CommSplit), "ncclCommSplit");
  EXPECT_STREQ(accelerate::detail::to_string(NcclSplitMethod::MpiBootstrap), "MPI bootstrap");
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
