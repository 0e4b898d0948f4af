// Rung: smoke (robustness). At least 100 corrupted files derived from a fixture model and
// from tiny written models, one per bug class of published GGUF loader bugs: each must
// give its own specific error naming the source, never crash or hang, and never allocate
// more than the file could justify. The suite also runs under ASan + UBSan.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <new>

#include "common/error.hpp"
#include "file_patcher.hpp"
#include "models/model.hpp"
#include "support/fixtures.hpp"
#include "support/tiny_gguf.hpp"
#include "tokenizer/tokenizer.hpp"

// ---- allocation accounting: every operator new in this binary is counted ----
namespace {
std::atomic<std::size_t> g_live_bytes{0};
std::atomic<std::size_t> g_peak_bytes{0};

void* counted_alloc(std::size_t n) {
    void* p = std::malloc(n == 0 ? 1 : n);
    if (!p) throw std::bad_alloc();
    const std::size_t live = g_live_bytes += malloc_usable_size(p);
    std::size_t peak = g_peak_bytes.load();
    while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
    }
    return p;
}
void counted_free(void* p) {
    if (!p) return;
    g_live_bytes -= malloc_usable_size(p);
    std::free(p);
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace {

using ember::test::FilePatcher;
using Bytes = std::vector<std::byte>;

struct Case {
    std::string name;
    std::function<Bytes()> make;
    std::string expected;  // a substring of the specific error
};

std::vector<std::byte> read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    Bytes b(std::filesystem::file_size(p));
    in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return b;
}

// Everything the CLI validates before any computation: the container, the
// hyperparameters and weights, and the vocabulary.
void validate_all(Bytes bytes, const std::string& source) {
    auto file = ember::gguf::File::from_bytes(std::move(bytes), source);
    (void)ember::models::load_model(file);
    (void)ember::tokenizer::Tokenizer::from_gguf(file);
}

constexpr std::uint64_t kMax64 = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t k2pow63 = 1ull << 63;

std::vector<Case> build_cases(const FilePatcher& P) {
    std::vector<Case> cases;
    auto add = [&](std::string name, std::function<void(Bytes&)> mutate, std::string expected) {
        cases.push_back({std::move(name), [&P, mutate] { Bytes b = P.copy(); mutate(b); return b; }, std::move(expected)});
    };
    auto add_bytes = [&](std::string name, std::function<Bytes()> make, std::string expected) {
        cases.push_back({std::move(name), std::move(make), std::move(expected)});
    };
    const std::uint64_t size = P.copy().size();

    // -- header --
    add("bad magic", [](Bytes& b) { b[0] = std::byte{'X'}; }, "not a GGUF file");
    add("magic GGML", [](Bytes& b) { b[3] = std::byte{'L'}; }, "not a GGUF file");
    add("version 1", [](Bytes& b) { FilePatcher::poke<std::uint32_t>(b, 4, 1); }, "version 1 is no longer supported");
    add("version 4", [](Bytes& b) { FilePatcher::poke<std::uint32_t>(b, 4, 4); }, "unsupported GGUF version 4");
    add("version 0", [](Bytes& b) { FilePatcher::poke<std::uint32_t>(b, 4, 0); }, "unsupported GGUF version 0");
    add("big-endian version", [](Bytes& b) { FilePatcher::poke<std::uint32_t>(b, 4, 0x03000000); }, "big-endian");
    for (std::uint64_t n : {k2pow63 - 1, std::uint64_t{1} << 40, std::uint64_t{1} << 21, std::uint64_t{100000}}) {
        add(fmt::format("tensor count {}", n), [n](Bytes& b) { FilePatcher::poke<std::uint64_t>(b, 8, n); }, "tensor count");
        add(fmt::format("metadata count {}", n), [n](Bytes& b) { FilePatcher::poke<std::uint64_t>(b, 16, n); }, "metadata count");
    }
    add("negative tensor count", [](Bytes& b) { FilePatcher::poke<std::int64_t>(b, 8, -1); }, "negative tensor count");
    add("negative metadata count", [](Bytes& b) { FilePatcher::poke<std::int64_t>(b, 16, -5); }, "negative metadata count");
    add("min int64 tensor count", [](Bytes& b) { FilePatcher::poke<std::uint64_t>(b, 8, k2pow63); }, "negative tensor count");

    // -- truncation at every structural boundary and inside each part --
    const std::uint64_t cuts[] = {0, 3, 4, 7, 12, 23, 24, 30,
                                  P.key_bytes_at("tokenizer.ggml.tokens") + 5,
                                  P.array_elements_at("tokenizer.ggml.tokens") + 1000,
                                  P.array_elements_at("tokenizer.ggml.scores") + 3,
                                  P.value_at("general.architecture") + 9,
                                  P.value_at("llama.attention.layer_norm_rms_epsilon") + 2,
                                  P.tensor_info_at("token_embd.weight") + 10,
                                  P.tensor_type_at("output_norm.weight") + 2,
                                  P.tensor_offset_at("blk.4.ffn_up.weight") + 4};
    for (std::uint64_t cut : cuts) {
        add(fmt::format("truncated at byte {}", cut), [cut](Bytes& b) { b.resize(cut); }, "truncated");
    }
    add("truncated before the data section", [&P](Bytes& b) { b.resize(P.parsed().data_offset() - 1); }, "data section would start");
    for (std::uint64_t cut : {P.parsed().data_offset() + 1000, size - 1, size - 4096}) {
        add(fmt::format("truncated tensor data at byte {}", cut), [cut](Bytes& b) { b.resize(cut); }, "of data but the file has");
    }

    // -- strings and array lengths --
    for (std::uint64_t len : {kMax64, k2pow63, std::uint64_t{1} << 32, std::uint64_t{70000}}) {
        add(fmt::format("key length {}", len), [&P, len](Bytes& b) { FilePatcher::poke(b, P.key_length_at("general.name"), len); },
            "metadata key length");
    }
    for (std::uint64_t len : {kMax64, k2pow63, size}) {
        add(fmt::format("string value length {}", len),
            [&P, len](Bytes& b) { FilePatcher::poke(b, P.value_at("general.architecture"), len); }, "exceeds the limit");
    }
    for (std::uint64_t n : {kMax64, k2pow63, std::uint64_t{1} << 61, std::uint64_t{1} << 40, size}) {
        add(fmt::format("string array count {}", n),
            [&P, n](Bytes& b) { FilePatcher::poke(b, P.array_count_at("tokenizer.ggml.tokens"), n); }, "claims");
        add(fmt::format("float array count {}", n),
            [&P, n](Bytes& b) { FilePatcher::poke(b, P.array_count_at("tokenizer.ggml.scores"), n); }, "claims");
    }
    add("string inside array with length 2^63",
        [&P](Bytes& b) { FilePatcher::poke(b, P.array_elements_at("tokenizer.ggml.tokens"), k2pow63); }, "exceeds the limit");

    // -- value types --
    for (std::uint32_t t : {13u, 100u, 0xFFFFFFFFu}) {
        add(fmt::format("value type id {}", t), [&P, t](Bytes& b) { FilePatcher::poke(b, P.value_type_at("llama.block_count"), t); },
            "unknown value type id");
        add(fmt::format("array element type id {}", t),
            [&P, t](Bytes& b) { FilePatcher::poke(b, P.value_at("tokenizer.ggml.scores"), t); }, "unknown value type id");
    }
    add_bytes("BOOL holding 7", [] {
        ember::test::TinySpec spec;
        auto w = ember::test::tiny_model_writer(spec);
        const std::byte seven{7};
        w.set_raw("tokenizer.ggml.add_bos_token", ember::gguf::ValueType::BOOL, std::span(&seven, 1));
        return w.to_bytes();
    }, "not 0 or 1");

    // -- duplicates --
    add("duplicate key", [&P](Bytes& b) {
        // Renames the eos key to the bos key's spelling (same length).
        const auto at = P.key_bytes_at("tokenizer.ggml.eos_token_id");
        const std::string twin = "tokenizer.ggml.bos_token_id";
        std::memcpy(b.data() + at, twin.data(), twin.size());
    }, "duplicate metadata key 'tokenizer.ggml.bos_token_id'");
    add("duplicate tensor name", [&P](Bytes& b) {
        const auto at = P.tensor_info_at("blk.1.ffn_up.weight") + 8;
        std::memcpy(b.data() + at, "blk.0", 5);
    }, "duplicate tensor name 'blk.0.ffn_up.weight'");

    // -- tensor infos --
    for (std::uint32_t n : {0u, 5u, 0xFFFFFFFFu}) {
        add(fmt::format("n_dims {}", n), [&P, n](Bytes& b) { FilePatcher::poke(b, P.tensor_n_dims_at("blk.0.attn_q.weight"), n); },
            "dimensions (1 to 4 allowed)");
    }
    for (std::int64_t ne : {std::int64_t{0}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::min()}) {
        add(fmt::format("dimension {}", ne), [&P, ne](Bytes& b) { FilePatcher::poke(b, P.tensor_ne_at("blk.0.attn_k.weight", 1), ne); },
            "has dimension 1");
    }
    add("dims product overflows", [&P](Bytes& b) {
        FilePatcher::poke<std::int64_t>(b, P.tensor_ne_at("blk.0.attn_q.weight", 0), std::int64_t{1} << 32);
        FilePatcher::poke<std::int64_t>(b, P.tensor_ne_at("blk.0.attn_q.weight", 1), std::int64_t{1} << 32);
    }, "product of its dimensions overflows");
    add("byte size overflows", [&P](Bytes& b) {
        FilePatcher::poke<std::int64_t>(b, P.tensor_ne_at("blk.0.attn_q.weight", 0), std::int64_t{1} << 31);
        FilePatcher::poke<std::int64_t>(b, P.tensor_ne_at("blk.0.attn_q.weight", 1), std::int64_t{1} << 31);
    }, "byte size overflows");
    add_bytes("tensor name of 64 bytes", [] {
        auto w = ember::test::tiny_model_writer({});
        const std::uint64_t ne[1] = {4};
        w.add_tensor(std::string(64, 'x'), ember::gguf::GgmlType::F32, ne, Bytes(16));
        return w.to_bytes();
    }, "name of 64 bytes");
    add("tensor name length 2^63", [&P](Bytes& b) { FilePatcher::poke(b, P.tensor_info_at("blk.2.attn_v.weight"), k2pow63); },
        "truncated");
    for (std::uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u}) {
        add(fmt::format("retired type id {}", id), [&P, id](Bytes& b) { FilePatcher::poke(b, P.tensor_type_at("blk.3.ffn_gate.weight"), id); },
            fmt::format("tensor 'blk.3.ffn_gate.weight' has ggml type id {}: re", id));
    }
    for (std::uint32_t id : {43u, 1000u, 0xFFFFFFFFu}) {
        add(fmt::format("unknown type id {}", id), [&P, id](Bytes& b) { FilePatcher::poke(b, P.tensor_type_at("output.weight"), id); },
            fmt::format("tensor 'output.weight' has ggml type id {}: unknown", id));
    }
    add("row not a multiple of the block", [&P](Bytes& b) {
        FilePatcher::poke<std::uint32_t>(b, P.tensor_type_at("blk.0.ffn_down.weight"), 8);  // Q8_0 with rows of 172
    }, "not a multiple of the block size 32");
    add("K-quant row not a multiple of 256", [&P](Bytes& b) {
        FilePatcher::poke<std::uint32_t>(b, P.tensor_type_at("blk.0.attn_q.weight"), 12);  // Q4_K with rows of 64
    }, "not a multiple of the block size 256");

    // -- offsets --
    add("offset not aligned", [&P](Bytes& b) {
        const auto at = P.tensor_offset_at("blk.1.attn_q.weight");
        FilePatcher::poke<std::uint64_t>(b, at, P.tensor("blk.1.attn_q.weight").offset + 4);
    }, "not a multiple of the alignment 32");
    for (std::uint64_t off : {kMax64 - 31, k2pow63, std::uint64_t{1} << 40, size}) {
        add(fmt::format("offset {} past the end", off), [&P, off](Bytes& b) { FilePatcher::poke(b, P.tensor_offset_at("blk.1.attn_q.weight"), off); },
            "of data but the file has");
    }
    add("overlapping tensors", [&P](Bytes& b) {
        FilePatcher::poke<std::uint64_t>(b, P.tensor_offset_at("blk.2.attn_q.weight"), P.tensor("blk.2.attn_k.weight").offset);
    }, "overlaps");
    add("partially overlapping tensors", [&P](Bytes& b) {
        FilePatcher::poke<std::uint64_t>(b, P.tensor_offset_at("blk.2.attn_q.weight"), P.tensor("blk.2.attn_k.weight").offset + 32);
    }, "overlaps");

    // -- alignment --
    auto with_alignment = [](ember::gguf::ValueType type, std::vector<std::byte> payload) {
        return [type, payload] {
            auto w = ember::test::tiny_model_writer({});
            w.set_raw("general.alignment", type, payload);
            return w.to_bytes();
        };
    };
    auto u32_bytes = [](std::uint32_t v) { Bytes b(4); std::memcpy(b.data(), &v, 4); return b; };
    add_bytes("alignment 0", with_alignment(ember::gguf::ValueType::UINT32, u32_bytes(0)), "not a non-zero power of two");
    add_bytes("alignment 3", with_alignment(ember::gguf::ValueType::UINT32, u32_bytes(3)), "not a non-zero power of two");
    add_bytes("alignment 48", with_alignment(ember::gguf::ValueType::UINT32, u32_bytes(48)), "not a non-zero power of two");
    add_bytes("alignment 2^31", with_alignment(ember::gguf::ValueType::UINT32, u32_bytes(1u << 31)), "above the limit");
    add_bytes("alignment 2^20", with_alignment(ember::gguf::ValueType::UINT32, u32_bytes(1u << 20)), "above the limit");
    add_bytes("alignment as INT32", with_alignment(ember::gguf::ValueType::INT32, u32_bytes(32)), "expected UINT32");
    add_bytes("alignment as FLOAT32", with_alignment(ember::gguf::ValueType::FLOAT32, u32_bytes(0x42000000)), "expected UINT32");
    add_bytes("alignment as UINT64", with_alignment(ember::gguf::ValueType::UINT64, Bytes(8)), "expected UINT32");
    add_bytes("alignment as STRING", [] {
        auto w = ember::test::tiny_model_writer({});
        w.set_string("general.alignment", "32");
        return w.to_bytes();
    }, "expected UINT32");

    // -- nested arrays --
    add_bytes("nested arrays 9 deep", [] {
        auto w = ember::test::tiny_model_writer({});
        Bytes payload;
        auto put = [&payload](auto v) { const auto* p = reinterpret_cast<const std::byte*>(&v); payload.insert(payload.end(), p, p + sizeof(v)); };
        for (int d = 0; d < 9; ++d) { put(std::uint32_t{9}); put(std::uint64_t{1}); }  // ARRAY of 1 ARRAY ...
        put(std::uint32_t{4}); put(std::uint64_t{0});
        w.set_raw("test.nested", ember::gguf::ValueType::ARRAY, payload);
        return w.to_bytes();
    }, "nests deeper than");
    add_bytes("nested array count 2^62", [] {
        auto w = ember::test::tiny_model_writer({});
        Bytes payload;
        auto put = [&payload](auto v) { const auto* p = reinterpret_cast<const std::byte*>(&v); payload.insert(payload.end(), p, p + sizeof(v)); };
        put(std::uint32_t{9}); put(std::uint64_t{1}); put(std::uint32_t{4}); put(std::uint64_t{1} << 62);
        w.set_raw("test.nested", ember::gguf::ValueType::ARRAY, payload);
        return w.to_bytes();
    }, "claims");

    // -- metadata of the wrong type (refused, never reinterpreted) --
    auto retype = [&P](const std::string& key, std::uint32_t type) {
        return [&P, key, type](Bytes& b) { FilePatcher::poke(b, P.value_type_at(key), type); };
    };
    add("embedding_length as FLOAT32", retype("llama.embedding_length", 6), "'llama.embedding_length' has type FLOAT32");
    add("rms eps as UINT32", retype("llama.attention.layer_norm_rms_epsilon", 4), "has type UINT32, expected FLOAT32");
    auto tiny_with = [](const std::string& key, std::function<void(ember::gguf::Writer&)> set) {
        return [key, set] {
            auto w = ember::test::tiny_model_writer({});
            w.erase(key);
            set(w);
            return w.to_bytes();
        };
    };
    add_bytes("string where an integer is read",
              tiny_with("llama.block_count", [](auto& w) { w.set_string("llama.block_count", "2"); }),
              "'llama.block_count' has type STRING");
    add_bytes("UINT8 array where floats are read", tiny_with("llama.attention.layer_norm_rms_epsilon", [](auto& w) {
        const std::byte payload[] = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{4}, std::byte{0},
                                     std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                     std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
        w.set_raw("llama.attention.layer_norm_rms_epsilon", ember::gguf::ValueType::ARRAY, payload);
    }), "has type ARRAY of UINT8, expected FLOAT32");
    add_bytes("tokens as an INT32 array", tiny_with("tokenizer.ggml.tokens", [](auto& w) {
        const std::vector<std::int32_t> ids(ember::test::tiny_vocab().size(), 7);
        w.set_i32_array("tokenizer.ggml.tokens", ids);
    }), "'tokenizer.ggml.tokens' has type ARRAY of INT32, expected ARRAY of STRING");
    add_bytes("tokenizer model as UINT32", tiny_with("tokenizer.ggml.model", [](auto& w) { w.set_u32("tokenizer.ggml.model", 1); }),
              "'tokenizer.ggml.model' has type UINT32");
    add_bytes("per-layer head counts of the wrong length", tiny_with("llama.attention.head_count_kv", [](auto& w) {
        const std::uint32_t kv[] = {2, 2, 2};
        w.set_u32_array("llama.attention.head_count_kv", kv);
    }), "has 3 entries, expected one per layer (2)");
    add_bytes("per-layer head counts as floats", tiny_with("llama.attention.head_count_kv", [](auto& w) {
        const float kv[] = {2, 2};
        w.set_f32_array("llama.attention.head_count_kv", kv);
    }), "has type ARRAY of FLOAT32, expected ARRAY of integers or BOOL");
    add("tokens re-typed as INT32 in place", [&P](Bytes& b) { FilePatcher::poke<std::uint32_t>(b, P.value_at("tokenizer.ggml.tokens"), 5); },
        "exceeds the limit");  // the strings re-read as integers derail the parse: caught at the next key

    // -- hyperparameters --
    auto set_u32 = [&P](const std::string& key, std::uint32_t v) {
        return [&P, key, v](Bytes& b) { FilePatcher::poke(b, P.value_at(key), v); };
    };
    for (std::uint32_t n : {0u, 1025u, 100000u, 0xFFFFFFFFu}) {
        add(fmt::format("block_count {}", n), set_u32("llama.block_count", n), "'llama.block_count' =");
    }
    add("embedding_length 0", set_u32("llama.embedding_length", 0), "'llama.embedding_length' = 0 is out of range");
    add("embedding_length 2^31", set_u32("llama.embedding_length", 1u << 31), "out of range");
    add("head_count 0", set_u32("llama.attention.head_count", 0), "head_count' must be between 1 and 4096 (got 0)");
    add("head_count_kv 0", set_u32("llama.attention.head_count_kv", 0), "head_count_kv = 0 is out of range");
    add("head_count_kv not dividing", set_u32("llama.attention.head_count_kv", 3), "not a multiple of head_count_kv 3");
    add("head_count huge", set_u32("llama.attention.head_count", 0xFFFFFFFFu), "(got 4294967295)");
    add("feed_forward_length 0", set_u32("llama.feed_forward_length", 0), "feed_forward_length = 0");
    add("rope dims differ from head dim", set_u32("llama.rope.dimension_count", 6), "must equal the head dimension");
    add("context_length 0", set_u32("llama.context_length", 0), "context_length' is 0");
    add("rms eps negative", [&P](Bytes& b) { FilePatcher::poke(b, P.value_at("llama.attention.layer_norm_rms_epsilon"), -1.0f); },
        "must be a positive finite number");
    add("rms eps NaN", [&P](Bytes& b) {
        FilePatcher::poke(b, P.value_at("llama.attention.layer_norm_rms_epsilon"), std::numeric_limits<float>::quiet_NaN());
    }, "must be a positive finite number");
    add("unsupported architecture", [&P](Bytes& b) {
        const std::string other = "mamba";
        std::memcpy(b.data() + P.value_at("general.architecture") + 8, other.data(), 5);
    }, "unsupported architecture 'mamba'");
    add("missing architecture", [&P](Bytes& b) {
        std::memcpy(b.data() + P.key_bytes_at("general.architecture"), "general.architectur_", 20);
    }, "'general.architecture' is missing");
    add("missing required key", [&P](Bytes& b) {
        b[P.key_bytes_at("llama.attention.layer_norm_rms_epsilon")] = std::byte{'X'};
    }, "'llama.attention.layer_norm_rms_epsilon' is missing");

    // -- tokenizer metadata --
    add("bos id outside the vocabulary", set_u32("tokenizer.ggml.bos_token_id", 512), "outside the vocabulary of 512 tokens");
    add("eos id far outside the vocabulary", set_u32("tokenizer.ggml.eos_token_id", 1u << 30), "outside the vocabulary");
    return cases;
}

}  // namespace

TEST_CASE("hostile GGUF files: each bug class gives its specific error, bounded allocation") {
    const auto path = ember::test::fixture_path("models/stories260K.gguf");
    const FilePatcher patcher(read_file(path));
    const auto cases = build_cases(patcher);
    MESSAGE("hostile cases: " << cases.size());
    CHECK(cases.size() >= 100);
    for (const auto& c : cases) {
        CAPTURE(c.name);
        Bytes bytes = c.make();
        const std::size_t file_size = bytes.size();
        const std::string source = "hostile/" + c.name + ".gguf";
        const std::size_t live_before = g_live_bytes.load();
        g_peak_bytes = live_before;
        std::string message;
        try {
            validate_all(std::move(bytes), source);
        } catch (const ember::Error& e) {
            message = e.what();
        }
        const std::size_t allocated = g_peak_bytes.load() - live_before;
        CAPTURE(message);
        CHECK_MESSAGE(!message.empty(), "the file was accepted");
        CHECK(message.find(source) != std::string::npos);
        CHECK(message.find(c.expected) != std::string::npos);
        // The loader copies nothing but the file itself (from_bytes owns it) and small tables.
        CHECK(allocated <= 2 * file_size + (1u << 20));
    }
}

TEST_CASE("hostile GGUF files: the intact fixture and tiny models are accepted") {
    const auto path = ember::test::fixture_path("models/stories260K.gguf");
    CHECK_NOTHROW(validate_all(read_file(path), path.string()));
    for (const char* arch : {"llama", "qwen3", "gemma4"}) {
        ember::test::TinySpec spec;
        spec.arch = arch;
        CHECK_NOTHROW(validate_all(ember::test::tiny_model_bytes(spec), arch));
    }
}

TEST_CASE("hostile GGUF files: the CLI names the file and byte offset and exits 1") {
    const auto dir = std::filesystem::temp_directory_path() / "ember-hostile-cli";
    std::filesystem::create_directories(dir);
    Bytes b = read_file(ember::test::fixture_path("models/stories260K.gguf"));
    FilePatcher::poke<std::uint64_t>(b, 8, k2pow63 - 1);
    const auto bad = dir / "count.gguf";
    std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    const auto r = ember::test::run_command(std::string(EMBER_BINARY) + " inspect " + bad.string(), true);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find(bad.string() + ": at byte 8: tensor count") != std::string::npos);
    const auto missing = ember::test::run_command(std::string(EMBER_BINARY) + " inspect /nonexistent/x.gguf", true);
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("/nonexistent/x.gguf: cannot open") != std::string::npos);
    std::filesystem::remove_all(dir);
}
