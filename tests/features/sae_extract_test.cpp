// Rungs: activation-reference (`ember extract --sae`: each SAE's features at the selected
// rows equal the NumPy float64 reference computed from Ember's own extracted site
// activations: the same active set except within 1e-6 of a boundary, values within 1e-5
// relative), and smoke (the sparse layout holds exactly the dense values; a dataset run's
// feature arrays are byte for byte the same packed and one sample at a time; `ember sae
// top` finds the largest rows; bad requests refused).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <fstream>
#include <sstream>

#include <ember/npy.hpp>

#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kScript = fs::path(EMBER_SOURCE_DIR) / "tests/features/sae_fixtures.py";
const char* const kModel = "synth-llama3-q8_0";
// Read at after_layer:1, but the transcoder (residual_mid:1).
const char* const kSaes[] = {"v6-standard", "v6-topk", "v6-layer-norm", "v5-gated", "v6-bf16", "v6-transcoder"};

std::string model_path() { return fixture_path(std::string("models/") + kModel + ".gguf").string(); }

std::string python() {
    for (const char* candidate : {"python3", "/usr/bin/python3"})
        if (run_command(std::string(candidate) + " -c 'import numpy' 2>/dev/null").exit_code == 0) return candidate;
    FAIL("no python3 with NumPy found; install python3-numpy (scripts/setup.sh does)");
    return {};
}

void run_python(const std::string& arguments) {
    const CommandResult r = run_command(python() + " " + shell_quote(kScript.string()) + " " + arguments, true);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
}

fs::path write_fixtures(const fs::path& dir) {
    const gguf::File file = gguf::File::open(model_path());
    const std::size_t width = models::load_model(file)->config().n_embd;
    std::vector<float> acts(4 * width);
    // (signed: only the weights' scale comes from these)
    for (std::size_t i = 0; i < acts.size(); ++i) acts[i] = static_cast<float>(static_cast<int>(i * 37 % 17) - 8) * 0.05f;
    npy::write_f32(dir / "acts.npy", acts.data(), {4, width});
    const fs::path saes = dir / "saes";
    fs::create_directory(saes);
    run_python("write " + shell_quote(saes.string()) + " " + shell_quote((dir / "acts.npy").string()) + " 1 11");
    return saes;
}

CommandResult ember(const std::string& args) { return run_command(std::string(EMBER_BINARY) + " " + args, true); }

std::string sae_options(const fs::path& saes) {
    std::string out;
    for (const char* name : kSaes) out += " --sae " + shell_quote((saes / name).string());
    return out;
}

json::object manifest(const fs::path& run) {
    std::ifstream in(run / "manifest.json");
    std::stringstream text;
    text << in.rdbuf();
    return json::parse(text.str()).as_object();
}

std::string read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// An integer .npy (int32 or int64) as int64 values, with its shape.
std::vector<std::int64_t> read_ints(const fs::path& path, std::vector<std::size_t>& shape) {
    std::ifstream in(path, std::ios::binary);
    const npy::Header h = npy::read_header(in, path);
    shape = h.shape;
    std::vector<std::int64_t> out(h.count());
    for (std::int64_t& v : out) {
        if (h.descr == "<i8") {
            in.read(reinterpret_cast<char*>(&v), 8);
        } else {
            REQUIRE(h.descr == "<i4");
            std::int32_t x = 0;
            in.read(reinterpret_cast<char*>(&x), 4);
            v = x;
        }
    }
    REQUIRE(in.good());
    return out;
}

// The dense [R, d_sae] array the CSR files of SAE `i` spell.
std::vector<float> dense_from_sparse(const fs::path& run, std::size_t i, std::size_t d_sae) {
    std::vector<std::size_t> indptr_shape, indices_shape;
    const auto indptr = read_ints(run / fmt::format("sae_features.sae{}.indptr.npy", i), indptr_shape);
    const auto indices = read_ints(run / fmt::format("sae_features.sae{}.indices.npy", i), indices_shape);
    const npy::Array values = npy::read(run / fmt::format("sae_features.sae{}.values.npy", i));
    REQUIRE(indptr.size() >= 1);
    REQUIRE(indptr.front() == 0);
    REQUIRE(static_cast<std::size_t>(indptr.back()) == indices.size());
    REQUIRE(values.values.size() == indices.size());
    const std::size_t R = indptr.size() - 1;
    std::vector<float> dense(R * d_sae, 0.0f);
    for (std::size_t r = 0; r < R; ++r)
        for (std::int64_t k = indptr[r]; k < indptr[r + 1]; ++k) {
            if (k > indptr[r]) CHECK(indices[k] > indices[k - 1]);  // ascending in a row
            dense[r * d_sae + static_cast<std::size_t>(indices[k])] = values.values[k];
        }
    return dense;
}

// The features of SAE `i` in `run` against the NumPy reference from the site rows `site_file`.
void check_against_reference(const fs::path& run, std::size_t i, const fs::path& sae_dir, const fs::path& site_file,
                             const fs::path& scratch) {
    const fs::path prefix = scratch / fmt::format("ref{}", i);
    run_python("reference " + shell_quote(sae_dir.string()) + " " + shell_quote(site_file.string()) + " " +
               shell_quote(prefix.string()));
    const npy::Array got = npy::read(run / fmt::format("sae_features.sae{}.npy", i));
    const npy::Array want = npy::read(prefix.string() + ".features.npy");
    const npy::Array margin = npy::read(prefix.string() + ".margin.npy");
    REQUIRE(got.shape == want.shape);
    // The plain bounds, on either route: the fast encoder sums in double too (fast_encoder.hpp).
    std::size_t active = 0, set_mismatches = 0, value_failures = 0;
    for (std::size_t k = 0; k < got.values.size(); ++k) {
        const bool fires = got.values[k] != 0.0f, should = want.values[k] != 0.0f;
        active += should;
        if (fires != should) {
            if (margin.values[k] >= 1e-6) ++set_mismatches;
            continue;
        }
        const double error = std::abs(static_cast<double>(got.values[k]) - want.values[k]);
        if (error > 1e-5 * std::abs(want.values[k]) + 1e-7) ++value_failures;
    }
    INFO(sae_dir.filename().string());
    CHECK(active > 0);
    CHECK(active < got.values.size());
    CHECK(set_mismatches == 0);
    CHECK(value_failures == 0);
}

}  // namespace

TEST_CASE("ember extract --sae: features equal the NumPy reference from Ember's own site rows, and sparse equals dense") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path());
    const fs::path dense = dir.path() / "dense", sparse = dir.path() / "sparse";
    const std::string common = "extract --model " + shell_quote(model_path()) +
                               " --prompt 'hello world, the features of a prompt' --stages after_layer,residual_mid "
                               "--layers 1 --select 1,2,3,-1" + sae_options(saes);
    CommandResult r = ember(common + " --out " + shell_quote(dense.string()));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    r = ember(common + " --sae-output sparse --out " + shell_quote(sparse.string()));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    for (const fs::path& run : {dense, sparse}) {
        r = ember("verify " + shell_quote(run.string()));
        CHECK_MESSAGE(r.exit_code == 0, r.output);
    }

    const json::array entries = manifest(dense).at("sae_features").as_array();
    REQUIRE(entries.size() == std::size(kSaes));
    for (std::size_t i = 0; i < std::size(kSaes); ++i) {
        const json::object& e = entries[i].as_object();
        const bool transcoder = std::string_view(kSaes[i]) == "v6-transcoder";
        CHECK(e.at("stage") == "sae_features");
        CHECK(e.at("layer") == 1);
        CHECK(e.at("sae").at("name") == kSaes[i]);
        CHECK(e.at("sae").at("path").as_string() == (saes / kSaes[i]).string());
        CHECK(e.at("sae").at("sha256").as_string().size() == 64);
        CHECK(e.at("positions").as_array().size() == 4);
        // The reference reads the site rows this very run extracted.
        const fs::path site = dense / (transcoder ? "residual_mid.layer1.npy" : "after_layer.layer1.npy");
        check_against_reference(dense, i, saes / kSaes[i], site, dir.path());

        const std::size_t d_sae = e.at("shape").as_array()[1].to_number<std::size_t>();
        const npy::Array want = npy::read(dense / fmt::format("sae_features.sae{}.npy", i));
        const std::vector<float> got = dense_from_sparse(sparse, i, d_sae);
        CHECK(got == want.values);  // the same values, bit for bit
        CHECK(manifest(sparse).at("sae_features").as_array()[i].at("layout") == "sparse");
    }
    // The SAE files are inputs of the run.
    std::size_t sae_inputs = 0;
    const json::object dense_manifest = manifest(dense);
    for (const json::value& input : dense_manifest.at("inputs").as_array()) sae_inputs += input.at("role") == "sae";
    CHECK(sae_inputs == 2 * std::size(kSaes));  // cfg.json and the weights of each
}

TEST_CASE("ember extract --dataset --sae: the reference holds, and packed evaluations equal one sample at a time") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path());
    const fs::path data = dir.path() / "data.jsonl";
    {
        std::ofstream out(data);
        out << R"({"id": "a", "text": "hello world"})" << "\n"
            << R"({"id": "b", "text": "the quick brown fox jumps", "select": "substring:brown fox"})" << "\n"
            << R"({"id": "c", "text": "one more sample of text here", "select": "last"})" << "\n"
            << R"({"id": "d", "text": "short"})" << "\n";
    }
    const std::string common = "extract --model " + shell_quote(model_path()) + " --dataset " + shell_quote(data.string()) +
                               " --stages after_layer,residual_mid --layers 1" + sae_options(saes);
    for (const char* layout : {"dense", "sparse"}) {
        const fs::path packed = dir.path() / (std::string("packed-") + layout);
        const fs::path alone = dir.path() / (std::string("alone-") + layout);
        CommandResult r = ember(common + " --sae-output " + layout + " --batch-tokens 4096 --out " + shell_quote(packed.string()));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        r = ember(common + " --sae-output " + layout + " --batch-tokens 1 --out " + shell_quote(alone.string()));
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        r = ember("verify " + shell_quote(packed.string()));
        CHECK_MESSAGE(r.exit_code == 0, r.output);
        std::size_t compared = 0;
        for (const auto& file : fs::directory_iterator(packed)) {
            const std::string name = file.path().filename().string();
            if (!name.starts_with("sae_features.")) continue;
            INFO(name);
            CHECK(read_bytes(file.path()) == read_bytes(alone / name));
            ++compared;
        }
        CHECK(compared == std::size(kSaes) * (std::string_view(layout) == "dense" ? 1 : 3));
        const json::array entries = manifest(packed).at("sae_features").as_array();
        REQUIRE(entries.size() == std::size(kSaes));
        const std::size_t rows = npy::read(packed / "after_layer.layer1.npy").shape[0];
        for (std::size_t i = 0; i < entries.size(); ++i) {
            CHECK(entries[i].at("shape").as_array()[0] == rows);
            if (std::string_view(layout) != "dense") continue;
            const bool transcoder = std::string_view(kSaes[i]) == "v6-transcoder";
            check_against_reference(packed, i, saes / kSaes[i],
                                    packed / (transcoder ? "residual_mid.layer1.npy" : "after_layer.layer1.npy"), dir.path());
        }
    }
}

TEST_CASE("ember sae top: the rows where a feature fires most, from dense and sparse runs") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path());
    const std::string common = "extract --model " + shell_quote(model_path()) +
                               " --prompt 'hello world, the features of a prompt' --layers 1 --sae " +
                               shell_quote((saes / "v6-standard").string());
    const fs::path dense = dir.path() / "dense", sparse = dir.path() / "sparse", plain = dir.path() / "plain";
    REQUIRE(ember(common + " --out " + shell_quote(dense.string())).exit_code == 0);
    REQUIRE(ember(common + " --sae-output sparse --out " + shell_quote(sparse.string())).exit_code == 0);

    // The feature firing on the most rows, and its rows by value, from the dense array itself.
    const npy::Array f = npy::read(dense / "sae_features.sae0.npy");
    const std::size_t R = f.shape[0], d_sae = f.shape[1];
    std::size_t feature = 0, best = 0;
    for (std::size_t j = 0; j < d_sae; ++j) {
        std::size_t n = 0;
        for (std::size_t r = 0; r < R; ++r) n += f.values[r * d_sae + j] != 0.0f;
        if (n > best) best = n, feature = j;
    }
    REQUIRE(best >= 2);
    std::size_t top_row = 0;
    for (std::size_t r = 1; r < R; ++r)
        if (f.values[r * d_sae + feature] > f.values[top_row * d_sae + feature]) top_row = r;

    const json::array tokens = manifest(dense).at("tokenizer").at("tokens").as_array();
    for (const fs::path& run : {dense, sparse}) {
        const CommandResult r = ember("sae top --run " + shell_quote(run.string()) + " --feature " +
                                      std::to_string(feature) + " --k 3 --json");
        REQUIRE_MESSAGE(r.exit_code == 0, r.output);
        const json::object o = json::parse(r.output).as_object();
        CHECK(o.at("firing") == best);
        const json::array& top = o.at("top").as_array();
        REQUIRE(top.size() == std::min<std::size_t>(3, best));
        CHECK(top[0].at("row") == top_row);
        CHECK(static_cast<float>(top[0].at("value").to_number<double>()) == f.values[top_row * d_sae + feature]);
        for (std::size_t k = 1; k < top.size(); ++k)
            CHECK(top[k].at("value").to_number<double>() <= top[k - 1].at("value").to_number<double>());
        const json::value& token = tokens.at(top_row);  // --select all: row r is position r
        CHECK(top[0].at("position") == top_row);
        CHECK(top[0].at("byte_start") == token.at("start"));
        CHECK(top[0].at("piece") == token.at("piece"));
    }

    // Refused by name: a run without features, a feature past d_sae.
    REQUIRE(ember("extract --model " + shell_quote(model_path()) + " --prompt hello --layers 1 --out " +
                  shell_quote(plain.string())).exit_code == 0);
    CommandResult r = ember("sae top --run " + shell_quote(plain.string()) + " --feature 0");
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("has no SAE features") != std::string::npos);
    r = ember("sae top --run " + shell_quote(dense.string()) + " --feature " + std::to_string(d_sae));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("past the SAE's") != std::string::npos);
}

TEST_CASE("ember extract --sae: bad requests are refused before anything is written") {
    TempDir dir;
    const fs::path out = dir.path() / "out";
    const std::string base = "extract --model " + shell_quote(model_path()) + " --prompt hello --out " + shell_quote(out.string());
    CommandResult r = ember(base + " --sae-output sparse");
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--sae-output goes with --sae") != std::string::npos);
    r = ember(base + " --sae " + shell_quote((dir.path() / "missing").string()));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("no such SAE directory") != std::string::npos);
    r = ember(base + " --sae-output csr --sae x");
    CHECK(r.exit_code == 2);
    CHECK_FALSE(fs::exists(out / "manifest.json"));
}

TEST_CASE("Gemma Scope 2: features extracted from config.json and params.safetensors, unknown options refused by name") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path());
    const fs::path run = dir.path() / "run";
    CommandResult r = ember("extract --model " + shell_quote(model_path()) + " --prompt 'hello world' --stages "
                            "after_layer,mlp_input --layers 1 --sae " + shell_quote((saes / "gemma-scope-2").string()) +
                            " --sae " + shell_quote((saes / "gemma-scope-2-transcoder").string()) + " --out " +
                            shell_quote(run.string()));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const json::array entries = manifest(run).at("sae_features").as_array();
    REQUIRE(entries.size() == 2);
    CHECK(entries[0].at("sae").at("format") == "gemma-scope-2");
    CHECK(entries[1].at("site") == "mlp_input:1");
    CHECK(entries[1].at("sae").at("transcoder") == true);
    check_against_reference(run, 0, saes / "gemma-scope-2", run / "after_layer.layer1.npy", dir.path());
    check_against_reference(run, 1, saes / "gemma-scope-2-transcoder", run / "mlp_input.layer1.npy", dir.path());

    // The affine skip connection, an unknown architecture, an unknown tensor: each by name.
    const fs::path bad = dir.path() / "bad";
    const auto refused = [&](const std::string& from, const std::string& to, const std::string& named) {
        fs::remove_all(bad);
        fs::copy(saes / "gemma-scope-2", bad);
        std::string config = read_bytes(bad / "config.json");
        const std::size_t at = config.find(from);
        REQUIRE(at != std::string::npos);
        config.replace(at, from.size(), to);
        std::ofstream(bad / "config.json", std::ios::binary | std::ios::trunc) << config;
        const CommandResult e = ember("extract --model " + shell_quote(model_path()) + " --prompt hi --out " +
                                      shell_quote((dir.path() / "never").string()) + " --sae " + shell_quote(bad.string()));
        INFO(e.output);
        CHECK(e.exit_code == 1);
        CHECK(e.output.find(named) != std::string::npos);
        CHECK(e.output.find("config.json") != std::string::npos);
        CHECK_FALSE(fs::exists(dir.path() / "never"));
    };
    refused("\"affine_connection\": false", "\"affine_connection\": true", "key 'affine_connection'");
    refused("\"architecture\": \"jump_relu\"", "\"architecture\": \"batch_topk\"", "key 'architecture'");
    refused("\"width\": ", "\"width\": 1, \"w\": ", "key 'width'");
}

}  // namespace ember::test

namespace ember::test {

TEST_CASE("ember extract CONFIG: [[sae]] with site (Gemma Scope's params.npz) and output.sae_output = sparse") {
    TempDir dir;
    const fs::path saes = write_fixtures(dir.path());
    const fs::path config = dir.path() / "extract.toml", run = dir.path() / "run";
    std::ofstream(config) << "[model]\npath = \"" << model_path() << "\"\n[prompt]\ntext = \"hello world\"\n"
                          << "[output]\ndir = \"" << run.string() << "\"\nstages = [\"after_layer\"]\nlayers = [1]\n"
                          << "sae_output = \"sparse\"\n[[sae]]\npath = \"" << (saes / "gemma-scope").string()
                          << "\"\nsite = \"blocks.1.hook_resid_post\"\n";
    const CommandResult r = ember("extract " + shell_quote(config.string()));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const json::object m = manifest(run);
    const json::object& e = m.at("sae_features").as_array().at(0).as_object();
    CHECK(e.at("layout") == "sparse");
    CHECK(e.at("sae").at("format") == "gemma-scope");
    CHECK(m.at("config").at("output").at("sae_output") == "sparse");
    // The sparse arrays as a dense one, against the reference on this run's own site rows.
    const std::size_t d_sae = e.at("shape").as_array()[1].to_number<std::size_t>();
    const std::vector<float> dense = dense_from_sparse(run, 0, d_sae);
    npy::write_f32(run.parent_path() / "as_dense.npy", dense.data(), {dense.size() / d_sae, d_sae});
    fs::create_directory(dir.path() / "check");
    fs::copy_file(run.parent_path() / "as_dense.npy", dir.path() / "check" / "sae_features.sae0.npy");
    check_against_reference(dir.path() / "check", 0, saes / "gemma-scope", run / "after_layer.layer1.npy", dir.path());
}

}  // namespace ember::test
