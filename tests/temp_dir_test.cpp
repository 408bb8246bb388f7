// Test processes leave nothing in /tmp, even when one is killed mid-test: the next test process
// removes the directories of processes that no longer run, and no other.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

TEST(TempDir, ADirectoryLeftByAKilledTestProcessIsRemovedByTheNextOne) {
  int path_pipe[2];
  ASSERT_EQ(pipe(path_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a test process killed while its directory exists
    auto* dir = new TempDir();
    const std::string path = dir->path().string();
    if (write(path_pipe[1], path.data(), path.size()) != static_cast<ssize_t>(path.size())) _exit(1);
    close(path_pipe[1]);
    raise(SIGKILL);
  }
  close(path_pipe[1]);
  std::string left(4096, '\0');
  const ssize_t n = read(path_pipe[0], left.data(), left.size());
  close(path_pipe[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_GT(n, 0);
  left.resize(static_cast<size_t>(n));
  ASSERT_TRUE(fs::is_directory(left)) << left;
  const TempDir mine;
  remove_dead_processes_dirs();
  EXPECT_FALSE(fs::exists(left)) << left;
  EXPECT_TRUE(fs::is_directory(mine.path())) << "a running process's directory stays";
}

}  // namespace
}  // namespace ttemu::test
