// Every JSON text Ember writes passes through here, so that all of it is RFC 8259 and any
// strict parser reads it:
//   - a string that is not valid UTF-8 is written with each invalid byte replaced by
//     U+FFFD, and the raw bytes are kept in hex in a sibling member "<key>_hex" (for an
//     array element: "<key>_hex" maps the element's index, "3" or "3.1" when nested, to
//     the hex) unless the object already has that member;
//   - a non-finite number (inf, -inf, NaN) is written as null with a sibling string
//     "<key>_nonfinite" ("inf", "-inf" or "nan"), mapped by index for array elements.
// Object keys are made valid UTF-8 the same way (without a sibling).
#pragma once

#include <boost/json/value.hpp>

#include <string>
#include <string_view>

namespace ember {

// `value` with the two rules above applied.
boost::json::value strict_value(const boost::json::value& value);

// Compact strict JSON (one line, no trailing newline): what JSON lines and --json use.
std::string strict_json(const boost::json::value& value);

// `bytes` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);

// Lowercase hex of raw bytes.
std::string hex_bytes(std::string_view bytes);

}  // namespace ember
