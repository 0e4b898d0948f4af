// JSON for people: objects and arrays of objects one member per line, indented by two
// spaces; arrays of scalars on one line. Used for --json output and manifests. Strict
// JSON (record/strict_json.hpp): invalid UTF-8 and non-finite numbers are made safe first.
#pragma once

#include <boost/json/value.hpp>

#include <string>

namespace ember {

std::string pretty_json(const boost::json::value& value);  // no trailing newline

}  // namespace ember
