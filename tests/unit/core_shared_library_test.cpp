// SharedLibrary: the first of several paths that opens, functions by name,
// and errors that say what was tried and what is missing.
#include "runtime/core/shared_library.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardtrain {
namespace {

TEST(SharedLibrary, OpensTheFirstPathThatLoadsAndFindsItsFunctions) {
  SharedLibrary lib({"libshardtrain-no-such-library.so.1", "libm.so.6"});
  ASSERT_TRUE(lib.loaded()) << lib.error();
  double (*cosine)(double) = nullptr;
  ASSERT_TRUE(lib.resolve("cos", cosine));
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_TRUE(lib.error().empty());
  EXPECT_THAT(lib.path(), ::testing::HasSubstr("libm.so.6"));
  EXPECT_NE(lib.path().find('/'), std::string::npos);  // where dladdr found it
}

TEST(SharedLibrary, AMissingFunctionIsRecordedUnlessOptional) {
  SharedLibrary lib({"libm.so.6"});
  void (*missing)() = nullptr;
  EXPECT_FALSE(lib.resolve("shardtrain_no_such_function", missing, /*required=*/false));
  EXPECT_TRUE(lib.error().empty());
  EXPECT_FALSE(lib.resolve("shardtrain_no_such_function", missing));
  EXPECT_THAT(lib.error(), ::testing::HasSubstr("lacks shardtrain_no_such_function"));
  EXPECT_EQ(missing, nullptr);
}

TEST(SharedLibrary, NoneLoadsNamesEveryAttempt) {
  SharedLibrary lib({"libshardtrain-a.so.1", "libshardtrain-b.so.1"});
  EXPECT_FALSE(lib.loaded());
  EXPECT_THAT(lib.error(), ::testing::HasSubstr("libshardtrain-a.so.1"));
  EXPECT_THAT(lib.error(), ::testing::HasSubstr("libshardtrain-b.so.1"));
  void (*fn)() = nullptr;
  EXPECT_FALSE(lib.resolve("cos", fn));
}

}  // namespace
}  // namespace shardtrain
