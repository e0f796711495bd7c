#!/usr/bin/python3
"""Converts one of Baidu DeepBench's NVIDIA training result workbooks
(results/train/DeepBench_NV_*.xlsx of github.com/baidu-research/DeepBench)
into the CSVs memfit's calibration reads (docs/benchmarks/data/deepbench/):

  deepbench_GPU_conv_fp32.csv  one convolution a row
  deepbench_GPU_gemm_fp32.csv  one SGEMM a row

usage: deepbench-xlsx-to-csv.py WORKBOOK.xlsx GPU [OUTDIR]

Reads the FP32 sheet (the one whose "Precision" cell says "Float"; other
sheets hold FP16 or mixed-precision kernels and are skipped) and copies its
"Dense Matrix Multiplication" and "Convolution" sections. Columns are found
by their header text, not their position: the 2017 workbooks (P100, 1080 Ti,
TITAN Xp) put the filter height R before the width S and pad_h, vertical
stride before pad_w, horizontal stride; the others the other way round.
Values are written as openpyxl reads them; "N/A*" (backward-data not run
for first layers) becomes an empty field. Prints the CUDA and cuDNN
versions of the "Specs" sheet. Needs openpyxl (pip install openpyxl).
"""
import csv
import os
import sys

import openpyxl

CONV_COLUMNS = [  # CSV column, header texts in the workbooks
    ("W", ["w"]),
    ("H", ["h"]),
    ("C", ["c"]),
    ("N", ["n"]),
    ("K", ["k"]),
    ("S", ["s", "s (filter width)"]),
    ("R", ["r", "r (filter height)"]),
    ("pad_w", ["pad_w"]),
    ("pad_h", ["pad_h"]),
    ("stride_w", ["horizontal stride"]),
    ("stride_h", ["vertical stride"]),
    ("fwd_ms", ["forward (msec)"]),
    ("bwd_data_ms", ["wrt inputs (msec)"]),
    ("bwd_filter_ms", ["wrt parameters (msec)"]),
    ("fwd_algo", ["forward algorithm"]),
]
GEMM_COLUMNS = [
    ("M", ["m"]),
    ("N", ["n"]),
    ("K", ["k"]),
    ("transA", ["a transpose"]),
    ("transB", ["b transpose"]),
    ("ms", ["time (msec)"]),
]
APP_COLUMN = 1  # unlabelled (or "Source"): the application of the kernel


def fp32_sheet(workbook):
    for sheet in workbook.worksheets:
        if sheet["A1"].value == "Precision" and sheet["B1"].value == "Float":
            return sheet
    sys.exit("no sheet with 'Precision: Float' in the workbook")


def section(rows, title, columns):
    """The rows of the section whose first cell is title, as CSV rows."""
    start = next(i for i, r in enumerate(rows) if r[0] == title)
    # The header is the section's title row itself (GEMM) or the next one.
    header_at = start if any(rows[start][2:]) else start + 1
    header = [str(v).strip().lower() if v is not None else "" for v in rows[header_at]]
    index = []
    for name, texts in columns:
        found = [i for i, h in enumerate(header) if h in texts]
        if len(found) != 1:
            sys.exit(f"{title}: column {name} not found once in {header}")
        index.append(found[0])
    out = []
    for row in rows[header_at + 1 :]:
        if row[0] is not None:
            break  # the next section
        if row[index[0]] is None:
            continue  # a blank row between groups of kernels
        fields = [cell(row[i]) for i in index]
        out.append([cell(row[APP_COLUMN])] + fields)
    return out


def cell(value):
    if value is None or value == "N/A*":
        return ""
    return str(value)


def specs(workbook):
    if "Specs" not in workbook.sheetnames:
        return {}
    return {str(r[0]).strip(): r[1] for r in workbook["Specs"].iter_rows(values_only=True) if r[0]}


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    path, gpu = sys.argv[1], sys.argv[2]
    outdir = sys.argv[3] if len(sys.argv) == 4 else "."
    workbook = openpyxl.load_workbook(path, data_only=True)
    sheet = fp32_sheet(workbook)
    rows = [list(r) for r in sheet.iter_rows(values_only=True)]
    width = max(len(r) for r in rows)
    rows = [r + [None] * (width - len(r)) for r in rows]
    for kind, title, columns in [
        ("conv", "Convolution", CONV_COLUMNS),
        ("gemm", "Dense Matrix Multiplication", GEMM_COLUMNS),
    ]:
        data = section(rows, title, columns)
        out = os.path.join(outdir, f"deepbench_{gpu}_{kind}_fp32.csv")
        with open(out, "w", newline="") as f:
            writer = csv.writer(f)  # CRLF line ends, as the committed files
            writer.writerow(["app"] + [name for name, _ in columns])
            writer.writerows(data)
        print(f"{out}: {len(data)} rows from sheet '{sheet.title}'")
    s = specs(workbook)
    print(f"GPU {s.get('GPU Model')}, CUDA {s.get('CUDA Version')}, cuDNN {s.get('Cudnn Version')}")


if __name__ == "__main__":
    main()
