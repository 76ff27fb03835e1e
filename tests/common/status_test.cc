#include "common/status.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace ak {
namespace {

TEST(Status, DefaultConstructedStatusIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(Status, EachFactorySetsItsCodeAndKeepsTheMessage) {
  EXPECT_EQ(Status::invalid("a").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Status::not_found("b").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::unavailable("c").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Status::timed_out("d").code(), StatusCode::kTimedOut);
  EXPECT_EQ(Status::internal("e").code(), StatusCode::kInternal);
  EXPECT_EQ(Status::unavailable("redis down").message(), "redis down");
  EXPECT_TRUE(Status::ok_status().ok());
}

TEST(Status, ToStringPutsTheCodeNameBeforeTheMessage) {
  EXPECT_EQ(Status::unavailable("cannot reach Redis").to_string(), "UNAVAILABLE: cannot reach Redis");
}

TEST(Status, EveryCodeHasADistinctName) {
  std::set<std::string> names;
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c)
    names.insert(status_code_name(static_cast<StatusCode>(c)));
  EXPECT_EQ(names.size(), static_cast<size_t>(StatusCode::kInternal) + 1);
  EXPECT_EQ(names.count("UNKNOWN"), 0u);
}

TEST(Result, AResultBuiltFromAValueIsOkAndHoldsIt) {
  Result<std::string> r(std::string("value"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "value");
  EXPECT_EQ(r->size(), 5u);
}

TEST(Result, AResultBuiltFromAnErrorIsNotOkAndCarriesTheStatus) {
  Result<int> r(Status::not_found("job 7 is not in the store"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "job 7 is not in the store");
}

TEST(Result, AResultHoldingAValueHasAnOkStatus) {
  Result<int> r(7);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
}

TEST(Result, AResultBuiltFromAnOkStatusIsAnErrorThatSaysWhy) {
  Result<int> r(Status::ok_status());
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.status().ok()) << "a caller returning r.status() must not pass on success";
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("OK Status"), std::string::npos) << r.status().message();
}

TEST(Result, ValueCanBeMovedOutOfAnRvalueResult) {
  Result<std::string> r(std::string(100, 'x'));
  std::string moved = std::move(r).value();
  EXPECT_EQ(moved.size(), 100u);
}

}  // namespace
}  // namespace ak
