// Rung: smoke (clear errors). Small models written in memory (tests/support/tiny_gguf),
// then broken one field at a time: each gives a named error, never a crash. Also: a tiny
// model of each family loads and evaluates, and evaluations beyond the context or the
// vocabulary are refused.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/session.hpp"
#include "support/tiny_gguf.hpp"

namespace ember::test {
namespace {

gguf::Writer tiny_writer(const std::string& arch) {
    TinySpec spec;
    spec.arch = arch;
    return tiny_model_writer(spec);
}

gguf::File open(const gguf::Writer& w) { return gguf::File::from_bytes(w.to_bytes(), "tiny.gguf"); }

// Replaces a tensor's name in the file bytes with another of the same length.
gguf::File rename_tensor(const gguf::Writer& w, const std::string& from, const std::string& to) {
    REQUIRE(from.size() == to.size());
    std::vector<std::byte> bytes = w.to_bytes();
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const auto at = text.find(from);
    REQUIRE(at != std::string_view::npos);
    std::memcpy(bytes.data() + at, to.data(), to.size());
    return gguf::File::from_bytes(std::move(bytes), "tiny.gguf");
}

void replace_u32(gguf::Writer& w, const std::string& key, std::uint32_t value) {
    w.erase(key);
    w.set_u32(key, value);
}

std::string load_error(const gguf::File& file, std::optional<models::Family> arch = std::nullopt) {
    try {
        (void)models::load_model(file, arch);
    } catch (const Error& e) {
        return e.what();
    }
    FAIL("the model loaded");
    return {};
}

}  // namespace

TEST_CASE("a tiny model of every family loads, prefills and decodes") {
    for (const char* arch : {"llama", "qwen3", "gemma4"}) {
        INFO(arch);
        const gguf::File file = open(tiny_writer(arch));
        const auto model = models::load_model(file);
        runtime::Session session(*model, {.context_length = 8, .threads = 2, .max_batch = 3});
        const std::vector<std::int32_t> prompt = {1, 260, 263};
        auto logits = session.prefill(prompt);
        CHECK(logits.rows == 1);
        CHECK(logits.cols == model->config().n_vocab);
        logits = session.decode(264);
        CHECK(session.position() == 4);
        for (std::size_t i = 0; i < logits.cols; ++i) REQUIRE(std::isfinite(logits.row(0)[i]));
    }
}

TEST_CASE("a mismatched --arch names both architectures") {
    const gguf::File file = open(tiny_writer("llama"));
    CHECK(load_error(file, models::Family::Qwen3) ==
          "tiny.gguf: --arch qwen3 was requested but the file's architecture is 'llama'");
}

TEST_CASE("a missing tensor is named") {
    const gguf::File file = rename_tensor(tiny_writer("llama"), "blk.1.ffn_up.weight", "blk.1.ffn_up.weighX");
    CHECK(load_error(file) == "tiny.gguf: tensor 'blk.1.ffn_up.weight' is missing");
    const gguf::File qwen = rename_tensor(tiny_writer("qwen3"), "blk.0.attn_k_norm.weight", "blk.0.attn_k_norm.weighX");
    CHECK(load_error(qwen) == "tiny.gguf: tensor 'blk.0.attn_k_norm.weight' is missing");
    const gguf::File gemma = rename_tensor(tiny_writer("gemma4"), "rope_freqs.weight", "rope_freqs.weighX");
    CHECK(load_error(gemma) == "tiny.gguf: tensor 'rope_freqs.weight' is missing");
}

TEST_CASE("a block count beyond the tensors present says which blocks exist") {
    gguf::Writer w = tiny_writer("llama");
    replace_u32(w, "llama.block_count", 3);
    CHECK(load_error(open(w)) ==
          "tiny.gguf: tensor 'blk.2.attn_norm.weight' is missing (llama.block_count = 3 but the file has tensors for "
          "blocks 0-1 only)");
}

TEST_CASE("a tensor whose shape disagrees with the hyperparameters names both shapes") {
    gguf::Writer kv = tiny_writer("llama");
    replace_u32(kv, "llama.attention.head_count_kv", 4);  // K/V projections are [32 -> 16], not [32 -> 32]
    CHECK(load_error(open(kv)) ==
          "tiny.gguf: tensor 'blk.0.attn_k.weight' has shape [32, 16], expected [32, 32] ([inputs, outputs], ne[0] first)");
    gguf::Writer ff = tiny_writer("qwen3");
    replace_u32(ff, "qwen3.feed_forward_length", 48);
    CHECK(load_error(open(ff)) ==
          "tiny.gguf: tensor 'blk.0.ffn_gate.weight' has shape [32, 64], expected [32, 48] ([inputs, outputs], ne[0] first)");
    gguf::Writer head = tiny_writer("gemma4");
    replace_u32(head, "gemma4.attention.key_length", 16);
    replace_u32(head, "gemma4.attention.value_length", 16);
    replace_u32(head, "gemma4.rope.dimension_count", 16);
    head.set_u32("gemma4.rope.dimension_count_swa", 8);  // it defaults to the full layers' count
    CHECK(load_error(open(head)) ==
          "tiny.gguf: tensor 'rope_freqs.weight' has shape [4], expected [8]");
}

TEST_CASE("invalid hyperparameters are named") {
    gguf::Writer heads = tiny_writer("llama");
    replace_u32(heads, "llama.attention.head_count", 3);
    CHECK(load_error(open(heads)) == "tiny.gguf: layer 0: head_count 3 is not a multiple of head_count_kv 2");

    gguf::Writer zero = tiny_writer("qwen3");
    replace_u32(zero, "qwen3.attention.head_count_kv", 0);
    CHECK(load_error(open(zero)) == "tiny.gguf: layer 0: attention.head_count_kv = 0 is out of range (1 to 4096)");

    gguf::Writer eps = tiny_writer("llama");
    eps.erase("llama.attention.layer_norm_rms_epsilon");
    eps.set_f32("llama.attention.layer_norm_rms_epsilon", -1.0f);
    CHECK(load_error(open(eps)) ==
          "tiny.gguf: llama.attention.layer_norm_rms_epsilon = -1 must be a positive finite number");

    gguf::Writer window = tiny_writer("gemma4");
    replace_u32(window, "gemma4.attention.sliding_window", 0);
    CHECK(load_error(open(window)) == "tiny.gguf: 'gemma4.attention.sliding_window' is 0");
}

TEST_CASE("tensors Ember does not implement are refused by name") {
    gguf::Writer w = tiny_writer("llama");
    std::vector<std::byte> bias(32 * sizeof(float));
    const std::uint64_t ne[1] = {32};
    w.add_tensor("blk.0.attn_q.bias", gguf::GgmlType::F32, ne, std::move(bias));
    CHECK(load_error(open(w)) ==
          "tiny.gguf: tensor 'blk.0.attn_q.bias' (biases, fused QKV and experts) is not supported by Ember");

    // I32 has the size of F32, so the file stays valid but the weight cannot be computed with.
    std::vector<std::byte> bytes = tiny_writer("llama").to_bytes();
    const gguf::File intact = gguf::File::from_bytes(bytes, "tiny.gguf");
    const gguf::TensorInfo& t = *intact.find_tensor("blk.0.attn_v.weight");
    const std::uint64_t type_at = t.info_offset + 8 + t.name.size() + 4 + 8 * t.n_dims;
    const std::uint32_t i32 = static_cast<std::uint32_t>(gguf::GgmlType::I32);
    std::memcpy(bytes.data() + type_at, &i32, 4);
    CHECK(load_error(gguf::File::from_bytes(std::move(bytes), "tiny.gguf")) ==
          "tiny.gguf: tensor 'blk.0.attn_v.weight' has type I32; Ember computes with F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights only");
}

TEST_CASE("evaluations beyond the context or the vocabulary are refused") {
    const gguf::File file = open(tiny_writer("llama"));
    const auto model = models::load_model(file);
    runtime::Session session(*model, {.context_length = 4, .threads = 1, .max_batch = 4});
    const std::vector<std::int32_t> five = {1, 260, 261, 262, 263};
    CHECK_THROWS_WITH_AS(runtime::generate(session, five, {}, {}),
                         "the prompt has 5 tokens but the context holds only 4 (--ctx)", Error);
    CHECK_THROWS_WITH_AS(runtime::generate(session, std::span(five).first(3), {.max_tokens = 3, .sampling = {}}, {}),
                         "the prompt (3 tokens) and 3 generated tokens need 5 positions, more than the context of 4 (--ctx)",
                         Error);
    CHECK_THROWS_WITH_AS(session.prefill(five), "5 tokens at position 0 do not fit in the context of 4 tokens (--ctx)", Error);
    session.prefill(std::span(five).first(4));
    CHECK_THROWS_WITH_AS(session.decode(1), "1 tokens at position 4 do not fit in the context of 4 tokens (--ctx)", Error);

    session.reset();
    const std::vector<std::int32_t> bad = {1, 9999};
    CHECK_THROWS_WITH_AS(session.prefill(bad), "token id 9999 at position 1 is outside the vocabulary of 267 tokens", Error);
}

}  // namespace ember::test
