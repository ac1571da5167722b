#include <gtest/gtest.h>
#include <sched.h>

#include "accelerate/runtime/host.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

TEST(CpuList, FormatsRunsCompactly) {
  using accelerate::format_cpu_list;
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({3}), "3");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(format_cpu_list({0, 2, 4, 5}), "0,2,4-5");
}

TEST(CpuList, AllowedCpusFollowTheAffinityMask) {
  const auto before = accelerate::allowed_cpus();
  ASSERT_FALSE(before.empty());
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof(original), &original), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(before.back(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(accelerate::allowed_cpus(), std::vector<int>{before.back()});
  ASSERT_EQ(sched_setaffinity(0, sizeof(original), &original), 0);
  EXPECT_EQ(accelerate::allowed_cpus(), before);
}

TEST(Host, NameIsShort) {
  const auto name = accelerate::hostname();
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(name.find('.'), std::string::npos);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
