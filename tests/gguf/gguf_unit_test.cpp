// Rung: smoke (unit). The GGUF writer and reader agree on every metadata type, tensors
// can be produced while the file is written (and a failure leaves nothing), typed
// getters refuse what they cannot hold, the type table matches model-math §1.5, and
// SHA-256 matches the FIPS 180-4 examples. The committed fuzz corpus is reproducible.
#include <doctest/doctest.h>

#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "gguf/gguf_file.hpp"
#include "gguf/gguf_writer.hpp"
#include "gguf/layout.hpp"
#include "seed_models.hpp"

using namespace ember;

TEST_CASE("writer -> reader round trip of every value type") {
    gguf::Writer w(64);
    w.set_string("s", "كتب");
    w.set_u32("u32", 7);
    w.set_i32("i32", -3);
    w.set_u64("u64", 1ull << 40);
    w.set_f32("f32", 0.5f);
    w.set_bool("b", true);
    const std::string strs[] = {"a", "", "▁b"};
    w.set_string_array("strs", strs);
    const float floats[] = {1.5f, -2.0f};
    w.set_f32_array("floats", floats);
    const std::int32_t ints[] = {-1, 2, 3};
    w.set_i32_array("ints", ints);
    const bool bools[] = {true, false};
    w.set_bool_array("bools", bools);
    const std::uint64_t ne[2] = {4, 3};
    std::vector<std::byte> data(4 * 3 * 4, std::byte{1});
    w.add_tensor("t", gguf::GgmlType::F32, ne, data);
    const std::uint64_t ne1[1] = {32};
    w.add_tensor("q", gguf::GgmlType::Q8_0, ne1, std::vector<std::byte>(34, std::byte{2}));

    const auto f = gguf::File::from_bytes(w.to_bytes(), "roundtrip");
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 64);
    CHECK(f.get_string("s") == "كتب");
    CHECK(f.get_u32("u32") == 7u);
    CHECK(f.get_uint("u64") == (1ull << 40));
    CHECK(f.get_f32("f32") == 0.5f);
    CHECK(f.get_bool("b") == true);
    CHECK(f.get_string_array("strs")->at(2) == "▁b");
    CHECK(f.get_f32_array("floats")->at(1) == -2.0f);
    CHECK(f.get_int_array("ints")->at(0) == -1);
    CHECK(f.get_per_layer("bools", 2)->at(0) == 1);
    CHECK(f.get_per_layer("u32", 4)->at(3) == 7);
    CHECK_FALSE(f.get_u32("absent").has_value());

    const auto* t = f.find_tensor("t");
    REQUIRE(t != nullptr);
    CHECK(t->nbytes == 48);
    CHECK(t->file_offset % 64 == 0);
    CHECK(std::memcmp(f.tensor_data(*t).data(), data.data(), 48) == 0);
    const auto layout = gguf::matrix_layout(f, *t);
    CHECK(layout.rows == 3);
    CHECK(layout.cols == 4);
    CHECK(layout.row_bytes == 16);
    CHECK(f.find_tensor("q")->nbytes == 34);
}

TEST_CASE("writer: tensors produced while the file is written, a failing producer leaves no file") {
    const std::uint64_t ne[2] = {4, 3};
    std::vector<std::byte> data(48);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i);
    gguf::Writer eager, lazy;
    eager.add_tensor("t", gguf::GgmlType::F32, ne, data);
    int calls = 0;
    lazy.add_tensor("t", gguf::GgmlType::F32, ne, [&](std::span<std::byte> out) {
        REQUIRE(out.size() == data.size());
        std::memcpy(out.data(), data.data(), out.size());
        ++calls;
    });
    CHECK(calls == 0);
    CHECK(lazy.to_bytes() == eager.to_bytes());
    CHECK(calls == 1);
    CHECK_THROWS_WITH_AS(eager.add_tensor("short", gguf::GgmlType::F32, ne, std::vector<std::byte>(47)),
                         doctest::Contains("'short' has 47 bytes of data, its shape needs 48"), Error);

    const auto path = std::filesystem::temp_directory_path() / fmt::format("ember-writer-{}.gguf", ::getpid());
    gguf::Writer failing;
    failing.add_tensor("t", gguf::GgmlType::F32, ne, [](std::span<std::byte>) { throw Error("producer failed"); });
    CHECK_THROWS_WITH_AS(failing.write_file(path), "producer failed", Error);
    CHECK_FALSE(std::filesystem::exists(path));
    for (const auto& entry : std::filesystem::directory_iterator(path.parent_path())) {
        CHECK(entry.path().filename().string().rfind(path.filename().string(), 0) != 0);  // no temporary left either
    }
}

TEST_CASE("typed getters refuse values of the wrong type, naming key and types") {
    gguf::Writer w;
    w.set_string("s", "12");
    w.set_i32("neg", -1);
    w.set_u64("big", 1ull << 40);
    w.set_u32("u", 3);
    const std::int32_t ints[] = {1, 2};
    w.set_i32_array("ints", ints);
    const auto f = gguf::File::from_bytes(w.to_bytes(), "typed");
    CHECK_THROWS_WITH_AS(f.get_u32("s"), doctest::Contains("'s' has type STRING, expected an unsigned integer"), Error);
    CHECK_THROWS_WITH_AS(f.get_u32("neg"), doctest::Contains("expected a non-negative integer"), Error);
    CHECK_THROWS_WITH_AS(f.get_u32("big"), doctest::Contains("too large for a 32-bit count"), Error);
    CHECK_THROWS_WITH_AS(f.get_f32("u"), doctest::Contains("'u' has type UINT32, expected FLOAT32"), Error);
    CHECK_THROWS_WITH_AS(f.get_string("u"), doctest::Contains("expected STRING"), Error);
    CHECK_THROWS_WITH_AS(f.get_f32_array("ints"), doctest::Contains("ARRAY of INT32, expected ARRAY of FLOAT32"), Error);
    CHECK_THROWS_WITH_AS(f.get_string_array("ints"), doctest::Contains("expected ARRAY of STRING"), Error);
    CHECK_THROWS_WITH_AS(f.get_per_layer("ints", 3), doctest::Contains("has 2 entries, expected one per layer (3)"), Error);
}

TEST_CASE("nested arrays parse, and typed getters refuse them") {
    gguf::Writer w;
    // ARRAY of 2 ARRAYs of UINT8: [[1, 2], [3]]
    const std::byte payload[] = {
        std::byte{9}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0},
        std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},  // outer: ARRAY x 2
        std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0},
        std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{2},  // UINT8 x 2
        std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0},
        std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{3},  // UINT8 x 1
    };
    w.set_raw("nested", gguf::ValueType::ARRAY, payload);
    w.set_u32("after", 5);
    const auto f = gguf::File::from_bytes(w.to_bytes(), "nested");
    CHECK(f.find("nested")->value.count == 2);
    CHECK(f.find("nested")->value.element_type == gguf::ValueType::ARRAY);
    CHECK(f.get_u32("after") == 5u);  // parsing continued at the right byte
    CHECK_THROWS_WITH_AS(f.get_int_array("nested"), doctest::Contains("ARRAY of ARRAY"), Error);
}

TEST_CASE("the ggml type table: sizes, holes and names (model-math §1.5)") {
    CHECK(gguf::type_traits(8)->type_size == 34);
    CHECK(gguf::type_traits(8)->block_size == 32);
    CHECK(gguf::type_traits(12)->type_size == 144);
    CHECK(gguf::type_traits(14)->type_size == 210);
    CHECK(gguf::type_traits(15)->type_size == 292);
    CHECK(gguf::type_traits(9)->type_size == 36);  // the C struct, not gguf-py's 40
    CHECK(gguf::type_traits(30)->name == "BF16");
    CHECK(gguf::type_traits(40)->block_size == 64);
    for (std::uint32_t hole : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 255u}) {
        CAPTURE(hole);
        CHECK_FALSE(gguf::type_traits(hole).has_value());
        CHECK_FALSE(gguf::invalid_type_reason(hole).empty());
    }
}

TEST_CASE("SHA-256 matches the FIPS 180-4 examples") {
    CHECK(sha256_hex(std::string_view("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex(std::string_view("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex(std::string_view("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    Sha256 h;  // a million 'a', fed in uneven pieces
    const std::string chunk(997, 'a');
    std::size_t left = 1000000;
    while (left > 0) {
        const std::size_t n = std::min(left, chunk.size());
        h.update(std::string_view(chunk).substr(0, n));
        left -= n;
    }
    CHECK(h.finish_hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("the committed fuzz seed corpus is exactly what the generator writes") {
    for (const auto& seed : ember::test::fuzz_seed_models()) {
        const std::string& name = seed.first;  // not structured bindings: clang 14 cannot capture those (CAPTURE)
        const auto& bytes = seed.second;
        CAPTURE(name);
        const auto path = std::filesystem::path(EMBER_SOURCE_DIR) / "tests/fuzz/corpus" / name;
        REQUIRE_MESSAGE(std::filesystem::exists(path), "regenerate with build/tests/fuzz/write_seed_corpus tests/fuzz/corpus");
        std::ifstream in(path, std::ios::binary);
        const std::vector<char> on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CHECK(on_disk.size() == bytes.size());
        CHECK(std::memcmp(on_disk.data(), bytes.data(), std::min(on_disk.size(), bytes.size())) == 0);
        CHECK_NOTHROW(gguf::File::from_bytes(bytes, name));
    }
}
