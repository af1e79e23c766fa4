#include "kv/spec.h"

#include <gtest/gtest.h>

namespace vlkv {
namespace {

TEST(Spec, ParsesNameAndParameters) {
  auto s = Spec::parse("kivi:bits=2,g=32,window=128");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->name(), "kivi");
  EXPECT_EQ(s->params().size(), 3u);
  EXPECT_EQ(s->get_int("g", 0, 1, 1024).value(), 32);
  EXPECT_EQ(s->get_int("absent", 7, 0, 10).value(), 7);
  EXPECT_FALSE(s->get_int("bits", 0, 3, 8).is_ok());  // out of range
  EXPECT_EQ(s->to_string(), "kivi:bits=2,g=32,window=128");
  const std::vector<ParamInfo> accepted = {{"bits", "2", ""}, {"g", "32", ""}};
  Status st = s->check_keys(accepted);
  EXPECT_EQ(st.message(), "'kivi' has no parameter 'window'; valid parameters: bits, g");
  EXPECT_DOUBLE_EQ(Spec::parse("x:clip=0.8").value().get_double("clip", 1, 0, 1).value(), 0.8);
  EXPECT_FALSE(Spec::parse("x:clip=abc").value().get_double("clip", 1, 0, 1).is_ok());
}

TEST(Spec, RejectsMalformed) {
  for (const char* bad : {"", ":a=1", "x:", "x:a", "x:=1", "x:a=", "x:a=1,", "x:a=1,a=2", "x y", "x:a=1;b=2"})
    EXPECT_FALSE(Spec::parse(bad).is_ok()) << bad;
}

}  // namespace
}  // namespace vlkv
