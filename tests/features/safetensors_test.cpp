// Rung: smoke (the safetensors and .npz readers: valid files read, hostile files refused).
//
// Files are written byte by byte here. A valid file's F32/F16/BF16 tensors read back to
// the values written; every hostile file (truncated, overlapping, holed or out-of-range
// offsets, a dtype whose size disagrees with the range, a header over the limit or past
// the end, duplicate keys, NaN and infinite weights, an unknown dtype, not JSON) is an
// ember::Error naming the file and, where there is one, the tensor.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "features/npz.hpp"
#include "features/safetensors.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
using features::SafetensorsFile;

std::string le64(std::uint64_t v) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
    return out;
}

std::string f32_bytes(std::initializer_list<float> values) {
    std::string out;
    for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
    return out;
}

fs::path write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

// header JSON + data, with the 8-byte length in front.
fs::path safetensors(const fs::path& path, const std::string& header, const std::string& data) {
    return write_file(path, le64(header.size()) + header + data);
}

std::string error_of(const fs::path& path) {
    try {
        SafetensorsFile::open(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// The error of reading every tensor's floats.
std::string floats_error_of(const fs::path& path) {
    try {
        const SafetensorsFile f = SafetensorsFile::open(path);
        for (const auto& t : f.tensors()) f.floats(t);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("a valid safetensors file reads back F32, F16 and BF16 values and its metadata") {
    TempDir dir;
    // F32 [2, 2]; F16 [2] = {1.5, -2}; BF16 [2] = {1.0, -0.5}
    const std::string data = f32_bytes({1.0f, -2.5f, 3.25f, 0.0f}) + std::string("\x00\x3e\x00\xc0", 4) +
                             std::string("\x80\x3f\x00\xbf", 4);
    const std::string header = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                               R"("h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},)"
                               R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[20,24]},)"
                               R"("__metadata__":{"format":"pt"}}   )";
    const fs::path path = safetensors(dir.path() / "ok.safetensors", header, data);
    const SafetensorsFile f = SafetensorsFile::open(path);
    REQUIRE(f.tensors().size() == 3);
    CHECK(f.metadata().at("format") == "pt");
    CHECK(f.floats(f.require("a", {2, 2})) == std::vector<float>{1.0f, -2.5f, 3.25f, 0.0f});
    CHECK(f.floats(f.require("h", {2})) == std::vector<float>{1.5f, -2.0f});
    CHECK(f.floats(f.require("b", {2})) == std::vector<float>{1.0f, -0.5f});
    CHECK_THROWS_WITH_AS(f.require("a", {4}), doctest::Contains("tensor 'a': shape [2, 2], expected [4]"), Error);
    CHECK_THROWS_WITH_AS(f.require("zz", {4}), doctest::Contains("tensor 'zz': missing"), Error);
}

TEST_CASE("hostile safetensors files are refused naming the file and the tensor") {
    TempDir dir;
    const std::string four = f32_bytes({1, 2, 3, 4});
    struct Case {
        const char* name;
        std::string header;
        std::string data;
        const char* expected;
    };
    const Case cases[] = {
        {"truncated", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", four.substr(0, 10),
         "tensor 'w': data_offsets [0, 16] run past the end of the data (10 bytes: the file is truncated)"},
        {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
         four, "tensor 'b': data_offsets [4, 12] overlap tensor 'a'"},
        {"hole", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four,
         "tensor 'a': data_offsets begin at 8, leaving bytes [0, 8) of the data unused"},
        {"trailing", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", four, "8 bytes after the last tensor's data"},
        {"dtype-size", R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})", four,
         "tensor 'a': F16 [4] needs 8 bytes, but data_offsets [0, 16] hold 16"},
        {"duplicate", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
         four, "header: key 'a' appears twice"},
        {"duplicate-field", R"({"a":{"dtype":"F32","dtype":"F16","shape":[4],"data_offsets":[0,16]}})", four,
         "header: key 'dtype' appears twice"},
        {"unknown-dtype", R"({"a":{"dtype":"F8_E4M3","shape":[16],"data_offsets":[0,16]}})", four,
         "tensor 'a': unknown dtype 'F8_E4M3'"},
        {"not-json", R"({"a":)", four, "header: not JSON"},
        {"negative", R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", four,
         "tensor 'a': shape dimensions must be non-negative integers"},
        {"backwards", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}})", four,
         "tensor 'a': data_offsets [16, 0] end before they begin"},
        {"overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}})", four,
         "tensor 'a': shape [4294967296, 4294967296, 16] overflows"},
        {"unknown-field", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"extra":1}})", four,
         "tensor 'a': unknown field 'extra'"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        const fs::path path = safetensors(dir.path() / (std::string(c.name) + ".safetensors"), c.header, c.data);
        const std::string error = error_of(path);
        CHECK_MESSAGE(error.find(path.string() + ": ") == 0, error);
        CHECK_MESSAGE(error.find(c.expected) != std::string::npos, error);
    }

    // The header length itself: over the limit, past the end, a file too short to hold it.
    const fs::path huge = write_file(dir.path() / "huge.safetensors", le64(SafetensorsFile::kMaxHeaderBytes + 1) + "{}");
    CHECK(error_of(huge).find("header length 104857601 is over the limit") != std::string::npos);
    const fs::path past = write_file(dir.path() / "past.safetensors", le64(100) + "{}");
    CHECK(error_of(past).find("header length 100 runs past the end of the file (10 bytes: truncated)") != std::string::npos);
    const fs::path tiny = write_file(dir.path() / "tiny.safetensors", "abc");
    CHECK(error_of(tiny).find("3 bytes: too short") != std::string::npos);
}

TEST_CASE("NaN and infinite weights are refused by tensor and element, and so are integer dtypes") {
    TempDir dir;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
    const fs::path with_nan = safetensors(dir.path() / "nan.safetensors", header, f32_bytes({1.0f, nan, 2.0f}));
    CHECK(floats_error_of(with_nan).find("nan.safetensors: tensor 'w': element 1 is NaN") != std::string::npos);
    const fs::path with_inf = safetensors(dir.path() / "inf.safetensors", header, f32_bytes({inf, 1.0f, 2.0f}));
    CHECK(floats_error_of(with_inf).find("tensor 'w': element 0 is infinite") != std::string::npos);
    // F16 0x7e00 is NaN.
    const fs::path half_nan = safetensors(dir.path() / "half.safetensors",
                                          R"({"w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})", std::string("\x00\x7e", 2));
    CHECK(floats_error_of(half_nan).find("tensor 'w': element 0 is NaN") != std::string::npos);
    const fs::path ints = safetensors(dir.path() / "ints.safetensors",
                                      R"({"w":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
    CHECK(floats_error_of(ints).find("tensor 'w': dtype I32: Ember reads F32, F16 and BF16 weights") != std::string::npos);
}

TEST_CASE("hostile .npz archives are refused naming the file and the member") {
    TempDir dir;
    const fs::path not_zip = write_file(dir.path() / "a.npz", "this is not a zip archive at all, not at all");
    CHECK_THROWS_WITH_AS(features::NpzFile::open(not_zip), doctest::Contains("a.npz: not a zip archive"), Error);
    const fs::path tiny = write_file(dir.path() / "b.npz", "PK");
    CHECK_THROWS_WITH_AS(features::NpzFile::open(tiny), doctest::Contains("b.npz: not a zip archive"), Error);
}

}  // namespace ember::test
