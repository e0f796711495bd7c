//===- KernelCsvTest.cpp - CSV files of kernels and their predictions -----===//
#include "compiler/cost/KernelCsv.h"

#include <catch2/catch.hpp>

using namespace memfit;

namespace {

std::string errorOf(llvm::Expected<KernelCsv> c) {
  REQUIRE_FALSE(static_cast<bool>(c));
  return llvm::toString(c.takeError());
}

const char *kConv =
    "app,W,H,C,N,K,S,R,pad_w,pad_h,stride_w,stride_h,fwd_ms,bwd_data_ms,"
    "bwd_filter_ms,fwd_algo\n"
    "Resnet,56,56,64,16,64,3,3,1,1,1,1,0.5,0.6,0.7,WINOGRAD\n"
    "DeepSpeech,700,161,1,4,32,20,5,0,0,2,2,0.078,,0.127,IMPLICIT_GEMM\n";

} // namespace

TEST_CASE("kernel CSV: convolutions by column name", "[kernelcsv]") {
  auto csv = parseKernelCsv(kConv, "conv.csv");
  REQUIRE(static_cast<bool>(csv));
  CHECK(csv->kind == KernelCsvKind::Conv);
  REQUIRE(csv->rows.size() == 2);
  const KernelRow &r = csv->rows[0];
  CHECK(r.line == 2);
  CHECK(r.conv.batch == 16);
  CHECK(r.conv.c == 64);
  CHECK(r.conv.k == 64);
  CHECK(r.conv.in == std::vector<int64_t>{56, 56});
  CHECK(r.conv.out == std::vector<int64_t>{56, 56});
  CHECK(*r.measured[0] == Approx(0.5e-3));
  CHECK(*r.measured[2] == Approx(0.7e-3));
  // W is the width, S the filter width: H 161 with R 5 at stride 2 gives
  // 79 rows, W 700 with S 20 gives 341 columns.
  const KernelRow &s = csv->rows[1];
  CHECK(s.conv.in == std::vector<int64_t>{161, 700});
  CHECK(s.conv.kernel == std::vector<int64_t>{5, 20});
  CHECK(s.conv.out == std::vector<int64_t>{79, 341});
  CHECK_FALSE(s.measured[1].has_value()); // empty: not measured
}

TEST_CASE("kernel CSV: GEMMs, and measured times are optional", "[kernelcsv]") {
  auto csv = parseKernelCsv("M,N,K,transA,transB\r\n1760,16,1760,N,T\r\n\n",
                            "gemm.csv");
  REQUIRE(static_cast<bool>(csv));
  CHECK(csv->kind == KernelCsvKind::Gemm);
  REQUIRE(csv->rows.size() == 1);
  CHECK(csv->rows[0].gemm.m == 1760);
  CHECK(csv->rows[0].gemm.n == 16);
  CHECK(csv->rows[0].gemm.k == 1760);
  CHECK_FALSE(csv->rows[0].measured[3].has_value());
}

TEST_CASE("kernel CSV: malformed rows are refused, naming the line",
          "[kernelcsv]") {
  std::string header = "app,M,N,K,transA,transB,ms\n";
  CHECK(errorOf(parseKernelCsv(header + ",1,2,3,N,N,0.1\n,1,2,N,N,0.1\n",
                               "g.csv")) ==
        "g.csv:3: expected 7 fields as in the header, got 6");
  CHECK(errorOf(parseKernelCsv(header + ",1,2,x3,N,N,0.1\n", "g.csv")) ==
        "g.csv:2: column 'K': expected a positive whole number, got 'x3'");
  CHECK(errorOf(parseKernelCsv(header + ",1,0,3,N,N,0.1\n", "g.csv")) ==
        "g.csv:2: column 'N': expected a positive whole number, got '0'");
  CHECK(errorOf(parseKernelCsv(header + ",1,2,3,N,C,0.1\n", "g.csv")) ==
        "g.csv:2: column 'transB': expected N or T, got 'C'");
  CHECK(errorOf(parseKernelCsv(header + ",1,2,3,N,N,-1\n", "g.csv")) ==
        "g.csv:2: column 'ms': expected a positive number of milliseconds "
        "or nothing, got '-1'");
  CHECK(errorOf(parseKernelCsv("a,b,c\n1,2,3\n", "x.csv")) ==
        "x.csv:1: expected a header naming the columns of convolutions (W, "
        "H, C, N, K, S, R, pad_w, pad_h, stride_w, stride_h) or of GEMMs (M, "
        "N, K), as in docs/benchmarks/data/deepbench/README.md");
  CHECK(errorOf(parseKernelCsv("W,H,C,N,K,S,R\n", "c.csv")) ==
        "c.csv:1: the header lacks column 'pad_w' of a convolution");
  CHECK(errorOf(parseKernelCsv("W,H,C,N,K,S,R,pad_w,pad_h,stride_w,stride_h\n"
                               "4,4,1,1,1,7,3,1,0,1,1\n",
                               "c.csv")) ==
        "c.csv:2: the filter (7 x 3) is larger than the padded input (6 x 4)");
  CHECK(errorOf(parseKernelCsv("\n\n", "e.csv")) ==
        "e.csv: the file is empty (expected a header line and one kernel per "
        "line)");
}

TEST_CASE("kernel CSV: predictions appended to every row", "[kernelcsv]") {
  DeviceSpec v100 = *builtinDevice("v100");
  auto csv = parseKernelCsv(kConv, "conv.csv");
  REQUIRE(static_cast<bool>(csv));
  std::string out = predictionCsv(v100, *csv);
  llvm::SmallVector<llvm::StringRef, 4> lines;
  llvm::StringRef(out).rtrim().split(lines, '\n');
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].endswith(
      "fwd_algo,pred_fwd_ms,pred_bwd_data_ms,pred_bwd_filter_ms"));
  CHECK(lines[1].startswith(csv->rows[0].text));
  // The fastest algorithm with no workspace limit: never slower than the
  // baseline, and what the printed column says.
  const ConvShape &s = csv->rows[0].conv;
  FastestConv fwd = fastestConvSeconds(v100, s, ConvDirection::Forward);
  double baseline =
      workSeconds(v100, convKernelWork(v100, s, ConvDirection::Forward, 0));
  CHECK(fwd.seconds <= baseline);
  CHECK(fwd.seconds > 0);
  llvm::SmallVector<llvm::StringRef, 20> cells;
  lines[1].split(cells, ',');
  double printed = 0;
  REQUIRE_FALSE(cells[cells.size() - 3].getAsDouble(printed));
  CHECK(printed == Approx(fwd.seconds * 1e3).epsilon(1e-5));
  // Twice the batch: at least as long, at most twice plus the floor.
  ConvShape twice = s;
  twice.batch *= 2;
  double t2 = fastestConvSeconds(v100, twice, ConvDirection::Forward).seconds;
  CHECK(t2 >= fwd.seconds);
  CHECK(t2 <= 2 * fwd.seconds);
}
