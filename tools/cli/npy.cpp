#include "npy.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include <fmt/format.h>

namespace facli {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader copies little-endian data as is");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// Python literal tokens of the header dict: {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }. No escapes, no nesting beyond the shape tuple.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& s) : s_(s) {}

  void parse(NpyArray& a) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (have_descr) fail("key 'descr' appears twice");
        skip_ws();
        if (peek() != '\'' && peek() != '"')
          fail("structured or nested dtypes are not supported ('descr' must be a type string)");
        a.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) fail("key 'fortran_order' appears twice");
        if (boolean())
          fail("fortran_order is True: only C-order arrays are supported "
               "(save np.ascontiguousarray(x))");
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) fail("key 'shape' appears twice");
        a.shape = shape_tuple();
        have_shape = true;
      } else {
        fail(fmt::format("unexpected key '{}' in the header", key));
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      if (peek() != '}') fail("expected ',' or '}' in the header dict");
    }
    ++pos_;  // '}'
    // numpy pads with spaces and ends the header with '\n'.
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
    if (pos_ + 1 != s_.size() || s_[pos_] != '\n')
      fail("the header must end with spaces and a newline after the dict");
    if (!have_descr || !have_order || !have_shape)
      fail("the header dict must have the keys 'descr', 'fortran_order' and 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    std::string head = s_.substr(0, 200);
    while (!head.empty() && (head.back() == ' ' || head.back() == '\n')) head.pop_back();
    throw NpyError(fmt::format("malformed .npy header ({}): {}", why, head));
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(fmt::format("expected '{}' at offset {}", c, pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_ws();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(fmt::format("expected a string at offset {}", pos_));
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    if (out.find('\\') != std::string::npos) fail("escapes in strings are not supported");
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_ws();
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }
  int64_t integer() {
    skip_ws();
    if (peek() < '0' || peek() > '9') fail(fmt::format("expected a size at offset {}", pos_));
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int d = peek() - '0';
      if (v > (std::numeric_limits<int64_t>::max() - d) / 10) fail("a size overflows int64");
      v = v * 10 + d;
      ++pos_;
    }
    return v;
  }
  // "()", "(5,)", "(2, 3)", "(2, 3,)"; a one-element tuple needs its comma.
  std::vector<int64_t> shape_tuple() {
    std::vector<int64_t> shape;
    expect('(');
    skip_ws();
    bool trailing_comma = false;
    while (peek() != ')') {
      shape.push_back(integer());
      skip_ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++pos_;
        skip_ws();
        trailing_comma = true;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape");
      }
      if (shape.size() > 32) fail("more than 32 dimensions");
    }
    ++pos_;
    if (shape.size() == 1 && !trailing_comma) fail("a one-element shape needs a trailing comma");
    return shape;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

void read_exact(std::FILE* f, void* dst, size_t n, const char* what) {
  if (n > 0 && std::fread(dst, 1, n, f) != n)
    throw NpyError(fmt::format("file too short: cannot read the {}", what));
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string NpyError::printable(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) out.push_back(c);
    else out += fmt::format("\\x{:02x}", u);
  }
  return out;
}

std::string NpyArray::dtype_name() const { return npy_type_name(descr); }

std::string npy_type_name(const std::string& descr) {
  static const std::pair<const char*, const char*> known[] = {
      {"<f4", "float32"}, {"<f2", "float16"}, {"<f8", "float64"}, {"<u2", "uint16"},
      {"<i4", "int32"},   {"<i8", "int64"},   {"<i2", "int16"},   {"|u1", "uint8"},
      {"|i1", "int8"},    {"|b1", "bool"},    {"<u4", "uint32"},  {"<u8", "uint64"}};
  for (auto [d, name] : known)
    if (descr == d) return fmt::format("{} ('{}')", name, descr);
  return fmt::format("'{}'", descr);
}

int64_t npy_itemsize(const std::string& descr) {
  if (descr.size() < 3) throw NpyError(fmt::format("unsupported dtype '{}'", descr));
  const char order = descr[0], kind = descr[1];
  if (order == '>')
    throw NpyError(fmt::format("dtype '{}' is big-endian; only little-endian files are supported "
                               "(save x.astype(x.dtype.newbyteorder('<')))", descr));
  if (order != '<' && order != '|')
    throw NpyError(fmt::format("dtype '{}' has no explicit byte order '<' or '|'", descr));
  if (std::strchr("fiub", kind) == nullptr)
    throw NpyError(fmt::format("unsupported dtype {}", npy_type_name(descr)));
  int64_t size = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || size > 64)
      throw NpyError(fmt::format("unsupported dtype '{}'", descr));
    size = size * 10 + (descr[i] - '0');
  }
  if (size != 1 && size != 2 && size != 4 && size != 8)
    throw NpyError(fmt::format("unsupported dtype '{}'", descr));
  if (order == '|' && size != 1)
    throw NpyError(fmt::format("dtype '{}' has no byte order", descr));
  return size;
}

NpyArray read_npy(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw NpyError("cannot open: no such file");
  if (!std::filesystem::is_regular_file(status)) throw NpyError("is not a regular file");
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) throw NpyError(fmt::format("cannot open: {}", std::strerror(errno)));

  char magic[kMagicLen];
  read_exact(f.get(), magic, kMagicLen, "magic string");
  if (std::memcmp(magic, kMagic, kMagicLen) != 0)
    throw NpyError("not a .npy file (the magic string \\x93NUMPY is missing)");
  unsigned char version[2];
  read_exact(f.get(), version, 2, "format version");
  if (version[0] < 1 || version[0] > 3 || version[1] != 0)
    throw NpyError(fmt::format("unsupported .npy format version {}.{} (1.0, 2.0 and 3.0 are)",
                               version[0], version[1]));
  uint32_t header_len = 0;
  if (version[0] == 1) {
    unsigned char b[2];
    read_exact(f.get(), b, 2, "header length");
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    read_exact(f.get(), b, 4, "header length");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  }
  if (header_len > (1u << 20)) throw NpyError("header length over 1 MiB");
  std::string header(header_len, '\0');
  read_exact(f.get(), header.data(), header_len, "header");

  NpyArray a;
  HeaderParser(header).parse(a);
  const int64_t item = npy_itemsize(a.descr);
  int64_t bytes = item;
  for (int64_t d : a.shape) {
    if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d)
      throw NpyError("the shape's size overflows");
    bytes *= d;
  }

  // The data must be exactly what the header promises.
  const long data_start = std::ftell(f.get());
  if (data_start < 0 || std::fseek(f.get(), 0, SEEK_END) != 0)
    throw NpyError(fmt::format("cannot seek: {}", std::strerror(errno)));
  const long end = std::ftell(f.get());
  if (end < 0 || std::fseek(f.get(), data_start, SEEK_SET) != 0)
    throw NpyError(fmt::format("cannot seek: {}", std::strerror(errno)));
  const int64_t have = static_cast<int64_t>(end) - data_start;
  if (have < bytes)
    throw NpyError(fmt::format("file is truncated: the header promises {} bytes of data, the file "
                               "has {}", bytes, have));
  if (have > bytes)
    throw NpyError(fmt::format("file has {} bytes of data after the {} the header promises",
                               have - bytes, bytes));
  a.data.resize(static_cast<size_t>(bytes));
  read_exact(f.get(), a.data.data(), a.data.size(), "data");
  return a;
}

void write_npy(const std::string& path, const std::string& descr,
               const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(5,)" keeps its comma
  else if (shape.size() == 1) dims.pop_back();
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Pad so the data starts on a 64-byte boundary; the header ends with '\n'.
  const bool v2 = header.size() + 1 + 10 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header.push_back('\n');

  File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw NpyError(fmt::format("cannot create: {}", std::strerror(errno)));
  std::string pre(kMagic, kMagicLen);
  pre.push_back(static_cast<char>(v2 ? 2 : 1));
  pre.push_back(0);
  const size_t n = header.size();
  pre.push_back(static_cast<char>(n & 0xFF));
  pre.push_back(static_cast<char>((n >> 8) & 0xFF));
  if (v2) {
    pre.push_back(static_cast<char>((n >> 16) & 0xFF));
    pre.push_back(static_cast<char>((n >> 24) & 0xFF));
  }
  const bool ok = std::fwrite(pre.data(), 1, pre.size(), f.get()) == pre.size() &&
                  std::fwrite(header.data(), 1, n, f.get()) == n &&
                  (bytes == 0 || std::fwrite(data, 1, bytes, f.get()) == bytes);
  const int err = errno;
  if (!ok) throw NpyError(fmt::format("cannot write: {}", std::strerror(err)));
  if (std::fclose(f.release()) != 0)
    throw NpyError(fmt::format("cannot write: {}", std::strerror(errno)));
}

}  // namespace facli
