// Reading JSON Ember does not trust (dataset lines, manifests, run.json, progress records):
// Boost.JSON's grammar, plus two rules its DOM parser does not keep:
//   - a key twice in one object is refused (Boost keeps one of them silently, so two
//     readers could disagree about what a file says);
//   - an integer too large for 64 bits is kept exactly, as a string of its digits
//     ("123456789012345678901234"), instead of becoming a rounded double, with a sibling
//     marker like strict_json's "_nonfinite": "<key>_bigint": true, or for an array's
//     elements "<key>_bigint": {"3": true} (indices "3.1" when nested); a marker never
//     replaces a member the text has, and a top-level integer has none. strict_json()
//     writes both back as they are. A number with a fraction or an exponent stays a
//     double (1e999 is inf, written back as null with its "_nonfinite" marker).
#pragma once

#include <boost/json/value.hpp>

#include <string>
#include <string_view>

namespace ember {

// The value `text` holds. ember::Error "WHERE: not valid JSON (...)" or "WHERE: the key
// "k" appears twice in one object".
boost::json::value parse_strict_json(std::string_view text, std::string_view where);

}  // namespace ember
