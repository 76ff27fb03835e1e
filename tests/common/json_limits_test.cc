#include "common/json_limits.h"

#include <string>

#include <gtest/gtest.h>

namespace ak {
namespace {

std::string nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonDepth, DocumentsWithinTheLimitPass) {
  EXPECT_TRUE(check_json_depth("{}", 1).ok());
  EXPECT_TRUE(check_json_depth(nested(64)).ok());
  EXPECT_TRUE(check_json_depth(R"({"a": [1, {"b": [2]}], "c": "x"})", 4).ok());
  EXPECT_TRUE(check_json_depth("42", 0).ok());
}

TEST(JsonDepth, OneLevelTooDeepIsRefusedNamingTheLimitAndOffset) {
  Status s = check_json_depth(nested(65));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("deeper than 64 levels"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("at byte 64"), std::string::npos) << s.message();
  EXPECT_FALSE(check_json_depth(R"({"a": {"b": {}}})", 2).ok());
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  EXPECT_TRUE(check_json_depth(R"(["[[[[[[[[", "{{{{{{{{"])", 1).ok());
  // An escaped quote does not end the string; the brackets after it are still inside it.
  EXPECT_TRUE(check_json_depth(R"(["a\"[[[[[[", "b\\"])", 1).ok());
  // After an escaped backslash the quote ends the string: the bracket after it counts.
  EXPECT_FALSE(check_json_depth(R"(["a\\", [[]]])", 2).ok());
}

TEST(JsonDepth, AMillionLevelsAreRefusedWithoutRecursion) {
  // Would overflow the stack of a recursive checker; the scan stops at the limit.
  EXPECT_FALSE(check_json_depth(nested(1'000'000, '{', '}')).ok());
  EXPECT_FALSE(check_json_depth(std::string(10'000'000, '[')).ok());
}

TEST(JsonValues, MoreValuesThanTheCapAreRefusedCommasInStringsDoNotCount) {
  std::string many = "[";
  for (int i = 0; i < 1000; ++i) many += "1,";
  many += "1]";
  EXPECT_TRUE(check_json_limits(many, 64, 1000).ok());
  Status s = check_json_limits(many, 64, 999);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("more than 999 values"), std::string::npos) << s.message();
  EXPECT_TRUE(check_json_limits(R"(["a,b,c,d", {"x": "1,2,3"}])", 64, 1).ok());
  EXPECT_TRUE(check_json_depth(many, 64).ok());  // the depth check alone counts no values
}

}  // namespace
}  // namespace ak
