// The seal of a manifest (docs/formats.md, "The seal"), header-only: shared by the host
// (run and extraction manifests, `ember verify`) and the built-in plugins (capture seals
// its manifest, patch checks its source's). A sealed manifest's last member is
//   "manifest_sha256": "<64 hex digits>"
// the SHA-256 of the file's bytes with those 64 digits replaced by '0' characters.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "ember/sha256.hpp"

namespace ember::seal {

inline const std::string& zeros() {
    static const std::string z(64, '0');
    return z;
}

// The member as written, for a digest (or the placeholder of zeros).
inline std::string member(std::string_view digest) { return "\"manifest_sha256\": \"" + std::string(digest) + "\""; }

// `text` holds member(zeros()) as its last occurrence; returns it with the digest in place.
inline std::string sealed(std::string text) {
    const std::string placeholder = member(zeros());
    const std::size_t at = text.rfind(placeholder);
    if (at == std::string::npos) throw std::runtime_error("manifest: the seal placeholder is missing");
    const std::string digest = sha256_hex(text);
    text.replace(at + placeholder.size() - 65, 64, digest);
    return text;
}

// What `text` hashes to with its claimed `digest` zeroed; empty when the claimed seal is
// not written as the last such member.
inline std::string content_digest(std::string_view text, std::string_view digest) {
    const std::string claimed = member(digest);
    const std::size_t at = text.rfind(claimed);
    if (at == std::string_view::npos) return "";
    std::string zeroed(text);
    zeroed.replace(at + claimed.size() - 65, 64, zeros());
    return sha256_hex(zeroed);
}

}  // namespace ember::seal
