#include "runtime/loaded_model.hpp"

#include <fmt/format.h>

#include "common/digest_cache.hpp"
#include "common/error.hpp"

namespace ember::runtime {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The SHA-256 of the bytes the mapping holds: the digest of the file in the state it was
// mapped in, so a file written between mapping and hashing is an error, not a digest of
// other bytes.
std::string mapped_sha256(const gguf::File& file, const fs::path& path) {
    const FileDigest digest = cached_file_digest(path);
    if (digest.state != file.mapping()->state())
        throw Error(fmt::format("{}: the model file changed while it was loaded; load it again", path.string()));
    return digest.sha256;
}

}  // namespace

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected)
    : LoadedModel(model_path, expected, Clock::now(), std::nullopt) {}

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected, std::string known_sha256)
    : LoadedModel(model_path, expected, Clock::now(), std::move(known_sha256)) {}

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected, Clock::time_point start,
                         std::optional<std::string> known_sha256)
    : path(fs::absolute(model_path).lexically_normal()),
      file(gguf::File::open(path)),
      model(models::load_model(file, expected)),
      tokenizer(tokenizer::Tokenizer::from_gguf(file)),
      sha256(known_sha256 ? std::move(*known_sha256) : mapped_sha256(file, path)),
      load_ms(std::chrono::duration<double, std::milli>(Clock::now() - start).count()) {}

}  // namespace ember::runtime
