// py_dumps against Python's json.dumps(..., ensure_ascii=False) (expected strings printed by
// CPython 3), and deep_sorted.
#include <gtest/gtest.h>

#include "chat/py_json.h"

namespace k3::chat::test {
namespace {

std::string py(const std::string& json, JsonSeparators seps = JsonSeparators::python) {
  return py_dumps(Json::parse(json), seps);
}

TEST(PyJson, FloatsAsPythonRepr) {
  EXPECT_EQ(py("[1e15, -0.0, 1.0, 100.0, 1.5e-7, 123456789.0, -2.5e-300, 18446744073709551615, "
               "-9223372036854775808]"),
            "[1000000000000000.0, -0.0, 1.0, 100.0, 1.5e-07, 123456789.0, -2.5e-300, "
            "18446744073709551615, -9223372036854775808]");
  // Shortest round-trip digits, the closest on ties (nlohmann alone writes ...56.7 and 1e+15).
  EXPECT_EQ(py("[1234567890123456.7, 5e-324, 1e-5, 0.0001, 123.456, 1e16, 1e22, "
               "9.999999999999999e15, 0.30000000000000004]"),
            "[1234567890123456.8, 5e-324, 1e-05, 0.0001, 123.456, 1e+16, 1e+22, 1e+16, "
            "0.30000000000000004]");
}

TEST(PyJson, StringsAndSeparators) {
  const std::string json =
      "{\"é\": \"\\u0001\\n\\u001f\x7f\u2028\\\"\\\\/\", \"b\": [], \"a\": {}}";
  EXPECT_EQ(py(json), "{\"é\": \"\\u0001\\n\\u001f\x7f\u2028\\\"\\\\/\", \"b\": [], \"a\": {}}");
  EXPECT_EQ(py(R"({"é": "x", "b": [1, {}], "a": {}})", JsonSeparators::compact),
            R"({"é":"x","b":[1,{}],"a":{}})");
  // Ill-formed UTF-8 never throws.
  EXPECT_EQ(py_dumps(Json(std::string("a\xff")), JsonSeparators::compact), "\"a\xef\xbf\xbd\"");
}

TEST(PyJson, DeepSorted) {
  const Json sorted = deep_sorted(Json::parse(R"({"b": [{"z": 1, "é": 2, "a": 3}], "a": null})"));
  EXPECT_EQ(py_dumps(sorted, JsonSeparators::compact), R"({"a":null,"b":[{"a":3,"z":1,"é":2}]})");
}

}  // namespace
}  // namespace k3::chat::test
