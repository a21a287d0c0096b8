// parse_request_body, the request parsing that tests/fuzz/fuzz_server_request.cpp fuzzes: the
// inputs that reach a parser's limits are 400s with a message, never another exception.
#include "server/openai.h"
#include "server/server_fixture.h"

namespace k3::test {
namespace {

using server::ApiError;

// The ApiError that parsing `body` throws (status 0 when it is accepted).
ApiError rejection(const std::string& body, bool chat) {
  try {
    server::parse_request_body(body, chat, tiny().tok, {});
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "accepted");
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(RequestBody, DeepNestingIsA400) {
  const std::string chat =
      R"({"messages": [{"role": "user", "content": "hi"}], "tools": )" + nested(200000) + "}";
  const ApiError e = rejection(chat, true);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(std::string(e.what()).find("nested"), std::string::npos) << e.what();
  // Completions read no nested field: an unknown deep one is ignored.
  EXPECT_EQ(rejection(R"({"prompt": "hi", "x": )" + nested(200000) + "}", false).status, 0);
}

TEST(RequestBody, NumbersBeyondRangeAre400s) {
  for (bool chat : {true, false}) {
    const std::string head =
        chat ? R"({"messages": [{"role": "user", "content": "hi"}], )" : R"({"prompt": "hi", )";
    for (const char* field : {R"("temperature": 1e400})", R"("seed": 18446744073709551616})",
                              R"("max_tokens": -9223372036854775809})",
                              R"("logit_bias": {"99999999999999999999": 1}})"}) {
      const ApiError e = rejection(head + field, chat);
      EXPECT_EQ(e.status, 400) << field;
      EXPECT_STRNE(e.what(), "") << field;
    }
  }
}

TEST(RequestBody, BadTextIsA400) {
  for (const char* body : {"", "{", "\xff", R"({"prompt": "\ud800"})", "null", "[]"}) {
    EXPECT_EQ(rejection(body, true).status, 400) << body;
    EXPECT_EQ(rejection(body, false).status, 400) << body;
  }
}

}  // namespace
}  // namespace k3::test
