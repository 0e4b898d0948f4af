// The fuzzer's seed corpus: small models of every family and weight type, written by the
// test helpers. tests/fuzz/corpus holds exactly these bytes (checked by gguf_unit_test),
// so the corpus is reproducible and never a copy of a fixture.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ember::test {

std::vector<std::pair<std::string, std::vector<std::byte>>> fuzz_seed_models();

}  // namespace ember::test
