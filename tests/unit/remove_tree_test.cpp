// detail::remove_tree: removes a tree depth first, counts what it removed,
// removes symbolic links without following them, treats a missing path as
// nothing to do, and reports failures through the error code or an
// exception naming the path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "detail/remove_tree.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace fs = std::filesystem;
using accelerate::detail::remove_tree;

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("accelerate_remove_tree_" + name + "_" + std::to_string(::getpid()));
  remove_tree(dir);
  fs::create_directories(dir);
  return dir;
}

void touch(const fs::path& file) { std::ofstream(file) << "x"; }

TEST(RemoveTree, RemovesEveryEntryDepthFirstAndCountsThem) {
  const fs::path root = fresh("tree");
  fs::create_directories(root / "a" / "b" / "c");
  touch(root / "top.txt");
  touch(root / "a" / "one");
  touch(root / "a" / "b" / "two");
  touch(root / "a" / "b" / "c" / "three");
  std::error_code error;
  // root, a, b, c and four files.
  EXPECT_EQ(remove_tree(root, error), 8u);
  EXPECT_FALSE(error) << error.message();
  EXPECT_FALSE(fs::exists(root));
}

TEST(RemoveTree, RemovesLinksWithoutFollowingThem) {
  const fs::path outside = fresh("outside");
  touch(outside / "keep");
  const fs::path root = fresh("links");
  fs::create_directory_symlink(outside, root / "to_dir");
  fs::create_symlink(outside / "keep", root / "to_file");
  EXPECT_EQ(remove_tree(root), 3u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(root)));
  EXPECT_TRUE(fs::exists(outside / "keep")) << "a link's target was removed";
  remove_tree(outside);
}

TEST(RemoveTree, AMissingPathOrAPlainFileIsHandled) {
  const fs::path root = fresh("single");
  std::error_code error;
  EXPECT_EQ(remove_tree(root / "absent", error), 0u);
  EXPECT_FALSE(error);
  EXPECT_EQ(remove_tree(root / "absent" / "deeper", error), 0u);
  EXPECT_FALSE(error);
  touch(root / "file");
  EXPECT_EQ(remove_tree(root / "file"), 1u);
  EXPECT_FALSE(fs::exists(root / "file"));
  remove_tree(root);
}

TEST(RemoveTree, AFailureIsReportedWithThePath) {
  // A name longer than NAME_MAX fails for every user, root included.
  const fs::path root = fresh("failure");
  const fs::path bad = root / std::string(300, 'x');
  std::error_code error;
  EXPECT_EQ(remove_tree(bad, error), 0u);
  EXPECT_EQ(error, std::errc::filename_too_long);
  try {
    remove_tree(bad);
    ADD_FAILURE() << "no exception";
  } catch (const fs::filesystem_error& thrown) {
    EXPECT_EQ(thrown.path1(), bad);
    EXPECT_EQ(thrown.code(), std::errc::filename_too_long);
  }
  remove_tree(root);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
