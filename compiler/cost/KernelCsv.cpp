//===- KernelCsv.cpp - CSV files of measured library kernels --------------===//
#include "compiler/cost/KernelCsv.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>

namespace memfit {

std::string_view kernelKindName(KernelKind k) {
  switch (k) {
  case KernelKind::ConvFwd:
    return "conv_fwd";
  case KernelKind::ConvBwdData:
    return "conv_bwd_data";
  case KernelKind::ConvBwdFilter:
    return "conv_bwd_filter";
  case KernelKind::Gemm:
    return "gemm";
  }
  return "?";
}

namespace {

const char *const kConvColumns[] = {"W",     "H",        "C",       "N",
                                    "K",     "S",        "R",       "pad_w",
                                    "pad_h", "stride_w", "stride_h"};
const char *const kGemmColumns[] = {"M", "N", "K"};
// Measured columns per kind, in KernelKind order.
const char *const kConvMeasured[] = {"fwd_ms", "bwd_data_ms", "bwd_filter_ms"};

std::vector<std::string> splitFields(llvm::StringRef line) {
  llvm::SmallVector<llvm::StringRef, 16> parts;
  line.split(parts, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
  std::vector<std::string> out;
  for (llvm::StringRef p : parts)
    out.push_back(p.trim().str());
  return out;
}

class RowReader {
public:
  RowReader(llvm::StringRef file, int line,
            const std::map<std::string, size_t> &columns,
            const std::vector<std::string> &fields)
      : file(file), line(line), columns(columns), fields(fields) {}

  /// A whole number >= least in column `name`.
  llvm::Error whole(const char *name, int64_t least, int64_t &out) const {
    const std::string &v = fields[columns.at(name)];
    long long x;
    if (llvm::StringRef(v).getAsInteger(10, x) || x < least)
      return error(name, v,
                   least > 0 ? "a positive whole number"
                             : "a non-negative whole number");
    out = x;
    return llvm::Error::success();
  }
  /// A positive number of milliseconds in column `name`, if present and
  /// not empty; seconds in `out`.
  llvm::Error millis(const char *name, std::optional<double> &out) const {
    auto it = columns.find(name);
    if (it == columns.end() || fields[it->second].empty())
      return llvm::Error::success();
    const std::string &v = fields[it->second];
    double x;
    if (llvm::StringRef(v).getAsDouble(x) || !std::isfinite(x) || !(x > 0))
      return error(name, v, "a positive number of milliseconds or nothing");
    out = x * 1e-3;
    return llvm::Error::success();
  }
  /// "N" or "T" in column `name`, if present.
  llvm::Error transpose(const char *name) const {
    auto it = columns.find(name);
    if (it == columns.end())
      return llvm::Error::success();
    const std::string &v = fields[it->second];
    if (v != "N" && v != "T")
      return error(name, v, "N or T");
    return llvm::Error::success();
  }

  llvm::Error error(const char *name, const std::string &got,
                    const char *expected) const {
    return makeError(file + ":" + llvm::Twine(line) + ": column '" + name +
                     "': expected " + expected + ", got " +
                     (got.empty() ? std::string("nothing") : quoteName(got)));
  }

private:
  llvm::StringRef file;
  int line;
  const std::map<std::string, size_t> &columns;
  const std::vector<std::string> &fields;
};

} // namespace

llvm::Expected<KernelCsv> parseKernelCsv(llvm::StringRef text,
                                         llvm::StringRef displayName) {
  KernelCsv csv;
  csv.name = displayName.str();
  std::map<std::string, size_t> columns;
  size_t width = 0;
  int lineNo = 0;
  bool haveHeader = false;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    ++lineNo;
    line = line.rtrim("\r");
    if (line.trim().empty())
      continue;
    std::vector<std::string> fields = splitFields(line);
    if (!haveHeader) {
      for (size_t i = 0; i < fields.size(); ++i)
        if (!columns.emplace(fields[i], i).second && !fields[i].empty())
          return makeError(displayName + ":" + llvm::Twine(lineNo) +
                           ": column " + quoteName(fields[i]) +
                           " appears twice in the header");
      bool conv = columns.count("W") != 0;
      bool gemm = !conv && columns.count("M") != 0;
      if (!conv && !gemm)
        return makeError(
            displayName + ":" + llvm::Twine(lineNo) +
            ": expected a header naming the columns of convolutions (W, H, "
            "C, N, K, S, R, pad_w, pad_h, stride_w, stride_h) or of GEMMs "
            "(M, N, K), as in docs/benchmarks/data/deepbench/README.md");
      csv.kind = conv ? KernelCsvKind::Conv : KernelCsvKind::Gemm;
      auto required = conv ? llvm::ArrayRef<const char *>(kConvColumns)
                           : llvm::ArrayRef<const char *>(kGemmColumns);
      for (const char *c : required)
        if (!columns.count(c))
          return makeError(displayName + ":" + llvm::Twine(lineNo) +
                           ": the header lacks column '" + c + "' of a " +
                           (conv ? "convolution" : "GEMM"));
      csv.header = line.str();
      width = fields.size();
      haveHeader = true;
      continue;
    }
    if (fields.size() != width)
      return makeError(displayName + ":" + llvm::Twine(lineNo) + ": expected " +
                       llvm::Twine(width) + " fields as in the header, got " +
                       llvm::Twine(fields.size()));
    RowReader r(displayName, lineNo, columns, fields);
    KernelRow row;
    row.line = lineNo;
    row.text = line.str();
    if (csv.kind == KernelCsvKind::Conv) {
      ConvKernel k;
      int64_t *whole[] = {&k.w, &k.h,    &k.c,    &k.n,       &k.k,      &k.s,
                          &k.r, &k.padW, &k.padH, &k.strideW, &k.strideH};
      for (size_t i = 0; i < std::size(kConvColumns); ++i) {
        bool pad = llvm::StringRef(kConvColumns[i]).startswith("pad");
        if (auto err = r.whole(kConvColumns[i], pad ? 0 : 1, *whole[i]))
          return err;
      }
      if (!convKernelShape(k, row.conv))
        return makeError(displayName + ":" + llvm::Twine(lineNo) +
                         ": the filter (" + llvm::Twine(k.s) + " x " +
                         llvm::Twine(k.r) +
                         ") is larger than the padded input (" +
                         llvm::Twine(k.w + 2 * k.padW) + " x " +
                         llvm::Twine(k.h + 2 * k.padH) + ")");
      for (int d = 0; d < 3; ++d)
        if (auto err = r.millis(kConvMeasured[d], row.measured[d]))
          return err;
    } else {
      if (auto err = r.whole("M", 1, row.gemm.m))
        return err;
      if (auto err = r.whole("N", 1, row.gemm.n))
        return err;
      if (auto err = r.whole("K", 1, row.gemm.k))
        return err;
      for (const char *t : {"transA", "transB"})
        if (auto err = r.transpose(t))
          return err;
      if (auto err =
              r.millis("ms", row.measured[static_cast<int>(KernelKind::Gemm)]))
        return err;
    }
    csv.rows.push_back(std::move(row));
  }
  if (!haveHeader)
    return makeError(displayName + ": the file is empty (expected a header "
                                   "line and one kernel per line)");
  return csv;
}

llvm::Expected<KernelCsv> loadKernelCsv(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return makeError(path + ": cannot read: " + buf.getError().message());
  return parseKernelCsv((*buf)->getBuffer(), path);
}

std::optional<double> predictKernel(const DeviceSpec &spec,
                                    const KernelCsv &csv, const KernelRow &row,
                                    KernelKind kind) {
  if (csv.kind == KernelCsvKind::Gemm)
    return kind == KernelKind::Gemm ? std::optional<double>(workSeconds(
                                          spec, gemmKernelWork(spec, row.gemm)))
                                    : std::nullopt;
  if (kind == KernelKind::Gemm)
    return std::nullopt;
  auto dir = static_cast<ConvDirection>(static_cast<int>(kind));
  return fastestConvSeconds(spec, row.conv, dir).seconds;
}

std::string predictionCsv(const DeviceSpec &spec, const KernelCsv &csv) {
  std::string out;
  llvm::raw_string_ostream os(out);
  bool conv = csv.kind == KernelCsvKind::Conv;
  os << csv.header
     << (conv ? ",pred_fwd_ms,pred_bwd_data_ms,pred_bwd_filter_ms" : ",pred_ms")
     << "\n";
  for (const KernelRow &row : csv.rows) {
    os << row.text;
    for (int k = conv ? 0 : 3; k < (conv ? 3 : 4); ++k)
      os << ","
         << llvm::format("%.6g", *predictKernel(spec, csv, row,
                                                static_cast<KernelKind>(k)) *
                                     1e3);
    os << "\n";
  }
  return os.str();
}

} // namespace memfit
