// A captured array's entry in the run directory's manifest (docs/formats.md, "Extraction
// run directory"), and its file name.
#pragma once

#include <boost/json/object.hpp>

#include <string>

#include "extract/extractor.hpp"
#include "record/run_directory.hpp"

namespace ember::extract {

// One array of the run directory: file, stage, layer, phase, positions, shape, dtype,
// what rows and columns mean, and the SHA-256 of its values (the data without the header).
boost::json::object tensor_entry(const Capture& capture, const record::FileRecord& file);

// STAGE.layerN.npy for layer stages, STAGE.npy for the logits stages.
std::string capture_file_name(const Capture& capture);

}  // namespace ember::extract
