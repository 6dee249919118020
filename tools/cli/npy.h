// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
// Only what the tool needs: little-endian, C-order arrays of simple dtypes.
// The header parser is strict on purpose: anything it does not fully understand
// is refused with a message, never guessed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace facli {

// Thrown for malformed or unsupported files; the message does not name the file
// (callers add the option and path).
// Messages quote the file's own bytes (its header, its dtype string); those
// outside printable ASCII are shown as \xNN, so a corrupt file puts no raw
// binary on the terminal and no invalid UTF-8 into a caller's log.
class NpyError : public std::runtime_error {
 public:
  explicit NpyError(const std::string& what) : std::runtime_error(printable(what)) {}

 private:
  static std::string printable(const std::string& s);
};

struct NpyArray {
  std::string descr;            // NumPy type string, e.g. "<f4"
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // C order, little endian

  int64_t numel() const;
  // A readable name of descr ("float32 ('<f4')").
  std::string dtype_name() const;
};

NpyArray read_npy(const std::string& path);

// Writes data (numel(shape) items of `descr`) as a version 1.0 file, or 2.0 if
// the header needs it.
void write_npy(const std::string& path, const std::string& descr,
               const std::vector<int64_t>& shape, const void* data, size_t bytes);

// Bytes per item of a simple type string ("<f4" -> 4); throws NpyError otherwise.
int64_t npy_itemsize(const std::string& descr);

// "float32 ('<f4')" for known types, the raw string otherwise.
std::string npy_type_name(const std::string& descr);

}  // namespace facli
