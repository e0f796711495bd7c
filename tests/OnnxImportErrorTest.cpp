//===- OnnxImportErrorTest.cpp - ONNX importer: every error case ----------===//
//
// Each malformed or unsupported input must give an llvm::Error that names
// the file, and where one applies the node and its op type, never a crash.
//
//===----------------------------------------------------------------------===//
#include "OnnxBuilder.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

using namespace memfit;
using namespace memfit::test;
using Catch::Contains;

namespace {

/// A valid model with enough weight bytes that truncation hits data.
OnnxBuilder convModel() {
  OnnxBuilder b;
  b.input("x", {1, 8, 6, 6})
      .init("w", {16, 8, 3, 3})
      .node("Conv", {"x", "w"}, {"y"})
      .output("y", 4);
  return b;
}

/// Marks initializer 0 of `b` as external data at `location`.
void makeExternal(OnnxBuilder &b, const std::string &location) {
  pb::TensorProto *t = b.model.mutable_graph()->mutable_initializer(0);
  t->clear_raw_data();
  t->set_data_location(pb::TensorProto::EXTERNAL);
  auto *e = t->add_external_data();
  e->set_key("location");
  e->set_value(location);
}

} // namespace

TEST_CASE("supportedOnnxOps is sorted and complete", "[onnx][errors]") {
  const auto &ops = supportedOnnxOps();
  CHECK(std::is_sorted(ops.begin(), ops.end()));
  for (const char *op : {"Add",
                         "AveragePool",
                         "BatchNormalization",
                         "Cast",
                         "Clip",
                         "Concat",
                         "Constant",
                         "Conv",
                         "Dropout",
                         "Flatten",
                         "Gather",
                         "Gemm",
                         "GlobalAveragePool",
                         "Identity",
                         "LRN",
                         "LeakyRelu",
                         "LogSoftmax",
                         "MatMul",
                         "MaxPool",
                         "Mul",
                         "Pad",
                         "ReduceMean",
                         "Relu",
                         "Reshape",
                         "Shape",
                         "Sigmoid",
                         "Slice",
                         "Softmax",
                         "Squeeze",
                         "Sub",
                         "Sum",
                         "Tanh",
                         "Unsqueeze"})
    CHECK(std::find(ops.begin(), ops.end(), op) != ops.end());
}

TEST_CASE("unsupported operator", "[onnx][errors]") {
  OnnxBuilder b;
  b.input("x", {2, 3})
      .node("Hardmax", {"x"}, {"y"}, {}, "my\nnode")
      .output("y", 2);
  std::string err = errorText(b.import());
  std::string list;
  for (const std::string &op : supportedOnnxOps())
    list += (list.empty() ? "" : ", ") + op;
  CHECK_THAT(err, Contains("'test.onnx'") && Contains("'my\\x0anode'") &&
                      Contains("(Hardmax)") &&
                      Contains("unsupported operator") && Contains(list));
}

TEST_CASE("every unsupported operator at once, with its PyTorch idiom",
          "[onnx][errors]") {
  OnnxBuilder b;
  b.input("x", {2, 3})
      .node("Hardmax", {"x"}, {"h"}, {}, "hm")
      .node("TopK", {"h", "k"}, {"c", "ci"}, {}, "tk")
      .node("Unique", {"c"}, {"y"}, {}, "uq")
      .output("y", 1);
  b.constInt64("k", {1}, {3});
  std::string err = errorText(b.import());
  CHECK_THAT(err, Contains("'test.onnx': 3 nodes use operators memfit does "
                           "not support:\n  node 'hm' (Hardmax): "
                           "unsupported operator Hardmax\n  node 'tk' "
                           "(TopK): unsupported operator TopK "
                           "(torch.topk") &&
                      Contains("node 'uq' (Unique): unsupported operator "
                               "Unique (torch.unique)") &&
                      Contains("\nmemfit supports "));
}

TEST_CASE("every node that cannot be imported at once, not what reads it",
          "[onnx][errors]") {
  // Two computations on weights memfit does not run (a cosine, a sine),
  // each read by an Add that would fail only because of them.
  OnnxBuilder b;
  b.input("x", {2, 4})
      .init("pos", {4})
      .init("table", {4})
      .node("Cos", {"pos"}, {"p"}, {}, "cos_pos")
      .node("Add", {"x", "p"}, {"a"}, {}, "add_pos")
      .node("Sin", {"table"}, {"t"}, {}, "sin_table")
      .node("Add", {"a", "t"}, {"y"}, {}, "add_table")
      .output("y", 2);
  std::string err = errorText(b.import());
  CHECK_THAT(err, Contains("'test.onnx': 2 nodes cannot be imported") &&
                      Contains("\n  node 'cos_pos' (Cos): computes on a "
                               "weight") &&
                      Contains("\n  node 'sin_table' (Sin): computes on a "
                               "weight") &&
                      Contains("--constants makes it a constant"));
  CHECK_THAT(err, !Contains("add_pos") && !Contains("add_table"));
}

TEST_CASE("operator from another domain", "[onnx][errors]") {
  OnnxBuilder b;
  b.input("x", {2, 3}).node("Relu", {"x"}, {"y"}, {}, "r").output("y", 2);
  b.model.mutable_graph()->mutable_node(0)->set_domain("com.example");
  CHECK_THAT(errorText(b.import()), Contains("'r'") &&
                                        Contains("com.example::Relu") &&
                                        Contains("unsupported operator"));
}

TEST_CASE("missing, truncated and garbage files", "[onnx][errors][file]") {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  std::string good = convModel().bytes();
  dir.write("good.onnx", good);
  REQUIRE(errorText(importOnnxFile(dir.file("good.onnx"))) == "");

  SECTION("missing") {
    std::string path = dir.file("nope.onnx");
    CHECK_THAT(errorText(importOnnxFile(path)),
               Contains("cannot open '" + path + "'"));
  }
  SECTION("truncated") {
    for (size_t keep : {good.size() / 2, good.size() - 1, size_t(10)}) {
      INFO("kept " << keep << " of " << good.size() << " bytes");
      dir.write("cut.onnx", good.substr(0, keep));
      CHECK_THAT(errorText(importOnnxFile(dir.file("cut.onnx"))),
                 Contains("'" + dir.file("cut.onnx") + "'"));
    }
  }
  SECTION("garbage") {
    std::string junk;
    for (int i = 0; i < 4096; ++i)
      junk += static_cast<char>((i * 7919 + 13) % 256);
    dir.write("junk.onnx", junk);
    CHECK_THAT(errorText(importOnnxFile(dir.file("junk.onnx"))),
               Contains("'" + dir.file("junk.onnx") + "'"));
    dir.write("empty.onnx", "");
    CHECK_THAT(errorText(importOnnxFile(dir.file("empty.onnx"))),
               Contains("no graph"));
    CHECK_THAT(errorText(importOnnxBytes("\x0a\xff\xff\xff\xff", "mem")),
               Contains("'mem'") && Contains("not a valid onnx model"));
  }
  SECTION("a directory") {
    CHECK_THAT(errorText(importOnnxFile(dir.path)), Contains("is a directory"));
  }
}

TEST_CASE("external data must stay in the model's directory",
          "[onnx][errors][file]") {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  llvm::sys::fs::create_directory(dir.file("m"));
  dir.write("outside.bin", std::string(16 * 8 * 9 * 4, '\0'));
  auto importWith = [&](const std::string &location) {
    OnnxBuilder b = convModel();
    makeExternal(b, location);
    dir.write("m/model.onnx", b.bytes());
    return errorText(importOnnxFile(dir.file("m/model.onnx")));
  };
  CHECK_THAT(importWith("../outside.bin"),
             Contains("'" + dir.file("m/model.onnx") + "'") &&
                 Contains("'../outside.bin'") && Contains("tensor 'w'") &&
                 Contains("escapes the model's directory"));
  CHECK_THAT(importWith("sub/../../outside.bin"), Contains("escapes"));
  CHECK_THAT(importWith(dir.file("outside.bin")), Contains("absolute path"));
  CHECK_THAT(importWith("missing.bin"),
             Contains("cannot open external data file") &&
                 Contains("tensor 'w'"));
  if (!llvm::sys::fs::create_link(dir.file("outside.bin"),
                                  dir.file("m/link.bin")))
    CHECK_THAT(importWith("link.bin"),
               Contains("outside the model's directory"));
  dir.write("m/short.bin", std::string(100, '\0'));
  CHECK_THAT(importWith("short.bin"),
             Contains("has 100 bytes of external data") &&
                 Contains("needs 4608"));

  OnnxBuilder b = convModel();
  makeExternal(b, "w.bin");
  CHECK_THAT(errorText(b.import()),
             Contains("external data needs the model read from a file"));
}

TEST_CASE("model-level errors", "[onnx][errors]") {
  SECTION("more than one output") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .node("Relu", {"x"}, {"y"})
        .node("Sigmoid", {"x"}, {"z"})
        .output("y", 2)
        .output("z", 2);
    CHECK_THAT(errorText(b.import()), Contains("2 outputs: 'y', 'z'") &&
                                          Contains("exactly one output"));
  }
  SECTION("non-float data input") {
    OnnxBuilder b;
    b.input("ids", {2, 3}, pb::TensorProto::INT64)
        .node("Cast", {"ids"}, {"f"}, {attrInt("to", 1)})
        .node("Relu", {"f"}, {"y"})
        .output("y", 2);
    // The ids cast to float are what the float op reads: an integer
    // program with a float output, no error.
    auto g = b.import();
    REQUIRE(static_cast<bool>(g));
    CHECK(g->ops[0].kind == OpKind::IntProgram);
    CHECK(g->values[g->ops[0].outputs[0]].dtype == DType::F32);
  }
  SECTION("labels as a second input used as data") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .input("labels", {2, 3})
        .node("Sub", {"x", "labels"}, {"y"}, {}, "diff")
        .output("y", 2);
    CHECK_THAT(errorText(b.import()),
               Contains("'diff'") && Contains("graph input 'labels'") &&
                   Contains("labels are not part of the model"));
  }
  SECTION("an unused second input") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .input("labels", {2})
        .node("Relu", {"x"}, {"y"})
        .output("y", 2);
    CHECK_THAT(errorText(b.import()), Contains("graph input 'labels'") &&
                                          Contains("exactly one data input"));
  }
  SECTION("unknown non-batch dimension") {
    OnnxBuilder b;
    b.input("x", {2, 3, -1}).node("Relu", {"x"}, {"y"}).output("y", 3);
    CHECK_THAT(errorText(b.import()),
               Contains("dimension 2 of data input 'x' is symbolic ('N')"));
  }
  SECTION("unsupported opset") {
    OnnxBuilder b(24);
    b.input("x", {2, 3}).node("Relu", {"x"}, {"y"}).output("y", 2);
    CHECK_THAT(errorText(b.import()), Contains("opset 24"));
  }
  SECTION("the output is a constant") {
    OnnxBuilder b;
    b.input("x", {2, 3}).node("Shape", {"x"}, {"s"}).output("s", 1);
    b.model.mutable_graph()
        ->mutable_output(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->set_elem_type(pb::TensorProto::INT64);
    CHECK_THAT(errorText(b.import()), Contains("is a constant"));
  }
  SECTION("the checker's complaint is passed on") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .node("Relu", {"x", "x"}, {"y"}, {}, "r")
        .output("y", 2);
    CHECK_THAT(errorText(b.import()),
               Contains("'test.onnx': the onnx checker rejects the model"));
  }
}

TEST_CASE("the batch must stay on axis 0", "[onnx][errors][batch]") {
  SECTION("Reshape merging the batch") {
    OnnxBuilder b;
    b.input("x", {-1, 3, 4})
        .initInt64("t", {1}, {-1})
        .node("Reshape", {"x", "t"}, {"y"}, {}, "merge")
        .output("y", 1);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'test.onnx': node 'merge' (Reshape)") &&
                   Contains("would move the batch off axis 0"));
  }
  SECTION("Reshape with a literal batch in a symbolic-batch model") {
    OnnxBuilder b;
    b.input("x", {-1, 3, 4})
        .initInt64("t", {2}, {2, -1})
        .node("Reshape", {"x", "t"}, {"y"}, {}, "r")
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'r' (Reshape)") && Contains("off axis 0"));
  }
  SECTION("Reshape moving the batch to axis 1") {
    OnnxBuilder b;
    b.input("x", {-1, 3, 4})
        .node("Shape", {"x"}, {"s"})
        .constInt64("i", {1}, {0})
        .node("Gather", {"s", "i"}, {"n"})
        .constInt64("c", {1}, {12})
        .node("Concat", {"c", "n"}, {"t"}, {attrInt("axis", 0)})
        .node("Reshape", {"x", "t"}, {"y"}, {}, "swap")
        .output("y", 2);
    // Each sample's 12 elements would be spread over the 12 rows.
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'swap' (Reshape)") && Contains("[12, N]") &&
                   Contains("split the batch across axes"));
  }
  SECTION("arithmetic on the batch size") {
    OnnxBuilder b;
    b.input("x", {-1, 3, 4})
        .node("Shape", {"x"}, {"s"})
        .constInt64("i", {1}, {0})
        .node("Gather", {"s", "i"}, {"n"})
        .constInt64("one", {1}, {1})
        .node("Add", {"n", "one"}, {"n2"}, {}, "double")
        .constInt64("m1", {1}, {-1})
        .node("Concat", {"n2", "m1"}, {"t"}, {attrInt("axis", 0)})
        .node("Reshape", {"x", "t"}, {"y"})
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'double' (Add)") && Contains("batch size"));
  }
  SECTION("Flatten of every axis") {
    OnnxBuilder b;
    b.input("x", {-1, 2, 3, 4})
        .node("Flatten", {"x"}, {"y"}, {attrInt("axis", 0)}, "fl")
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'fl' (Flatten)") &&
                   Contains("would flatten the batch into every other axis"));
  }
  SECTION("Concat along the batch") {
    OnnxBuilder b;
    b.input("x", {-1, 2})
        .node("Relu", {"x"}, {"r"})
        .node("Concat", {"x", "r"}, {"y"}, {attrInt("axis", 0)}, "cat")
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'cat' (Concat)") && Contains("axis 0"));
  }
  SECTION("Pad on the batch") {
    OnnxBuilder b;
    b.input("x", {-1, 2})
        .constInt64("p", {4}, {1, 0, 0, 0})
        .node("Pad", {"x", "p"}, {"y"}, {}, "pad")
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'pad' (Pad)") && Contains("batch axis"));
  }
  SECTION("Softmax across the batch") {
    OnnxBuilder b;
    b.input("x", {-1, 2})
        .node("Softmax", {"x"}, {"y"}, {attrInt("axis", 0)}, "sm")
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'sm' (Softmax)") && Contains("across the batch"));
  }
}

TEST_CASE("operand roles", "[onnx][errors]") {
  SECTION("a computed Conv weight") {
    OnnxBuilder b;
    b.input("x", {1, 1, 4, 4})
        .node("Relu", {"x"}, {"w"})
        .node("Conv", {"x", "w"}, {"y"}, {}, "c")
        .output("y", 4);
    CHECK_THAT(errorText(b.import()),
               Contains("'c' (Conv)") && Contains("'w' must be a weight"));
  }
  SECTION("a value computed from a weight in a weight's operand") {
    OnnxBuilder b;
    b.input("x", {1, 3, 4, 4})
        .init("w", {3, 3, 1, 1})
        .constFloat("two", 2.0f)
        .node("Mul", {"w", "two"}, {"w2"})
        .node("Conv", {"x", "w2"}, {"y"}, {}, "c")
        .output("y", 4);
    CHECK_THAT(errorText(b.import()),
               Contains("'c' (Conv)") &&
                   Contains("('w2') is computed from the weight 'w'"));
  }
  SECTION("a spatial weight in an elementwise op") {
    OnnxBuilder b;
    // Varying along channels and width but not height: no one run.
    b.input("x", {1, 3, 4, 4})
        .init("s", {3, 1, 4})
        .node("Mul", {"x", "s"}, {"y"}, {}, "m")
        .output("y", 4);
    CHECK_THAT(errorText(b.import()),
               Contains("'m' (Mul)") && Contains("contiguous run"));
  }
  SECTION("activations of shapes that do not broadcast") {
    OnnxBuilder b;
    b.input("x", {1, 4, 4, 4})
        .constInt64("s0", {1}, {0})
        .constInt64("s1", {1}, {2})
        .constInt64("ax", {1}, {1})
        .node("Slice", {"x", "s0", "s1", "ax"}, {"p"})
        .node("Mul", {"x", "p"}, {"y"}, {}, "m")
        .output("y", 4);
    CHECK_THAT(errorText(b.import()),
               Contains("'m' (Mul)") && Contains("same shape"));
  }
  SECTION("MaxPool indices") {
    OnnxBuilder b;
    b.input("x", {1, 1, 4, 4})
        .node("MaxPool", {"x"}, {"y", "idx"},
              {attrInts("kernel_shape", {2, 2})}, "mp")
        .node("Cast", {"idx"}, {"fi"}, {attrInt("to", 1)})
        .node("Add", {"y", "fi"}, {"z"})
        .output("z", 4);
    CHECK_THAT(errorText(b.import()),
               Contains("'mp' (MaxPool)") && Contains("Indices"));
  }
  SECTION("Clip bound computed from data") {
    OnnxBuilder b;
    b.input("x", {1})
        .node("Relu", {"x"}, {"r"})
        .node("Clip", {"x", "r"}, {"y"}, {}, "clip")
        .output("y", 1);
    CHECK_THAT(errorText(b.import()), Contains("'clip' (Clip)") &&
                                          Contains("operand 1 ('r')") &&
                                          Contains("must be a constant"));
  }
}

TEST_CASE("unnamed nodes are labelled by their index", "[onnx][errors]") {
  OnnxBuilder b;
  b.input("x", {2, 3})
      .node("Relu", {"x"}, {"r"})
      .node("Hardmax", {"r"}, {"y"})
      .output("y", 2);
  CHECK_THAT(errorText(b.import()), Contains("node #1 (Hardmax)"));

  OnnxBuilder ok;
  ok.input("x", {2, 3}).node("Relu", {"x"}, {"y"}).output("y", 2);
  auto g = ok.import();
  if (!g)
    FAIL(llvm::toString(g.takeError()));
  CHECK(g->ops[0].name == "Relu#0");
}

TEST_CASE("fold-only operators on activations", "[onnx][errors]") {
  OnnxBuilder b;
  b.input("x", {2, 3})
      .constInt64("one", {}, {1})
      .node("Equal", {"x", "one"}, {"y"}, {}, "eq")
      .output("y", 2);
  CHECK_THAT(errorText(b.import()), Contains("'eq' (Equal)") &&
                                        Contains("only on constants") &&
                                        Contains("operand 0 ('x')"));
}

TEST_CASE("the output must be computed", "[onnx][errors]") {
  OnnxBuilder b;
  b.input("x", {2, 3}).node("Identity", {"x"}, {"y"}).output("y", 2);
  CHECK_THAT(errorText(b.import()), Contains("is the data input itself"));
}

TEST_CASE("weights with unusable contents", "[onnx][errors]") {
  SECTION("a declared weight with a symbolic dimension") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .input("w", {-1, 3})
        .node("Gemm", {"x", "w"}, {"y"}, {attrInt("transB", 1)}, "fc")
        .output("y", 2);
    CHECK_THAT(errorText(b.import()),
               Contains("'fc' (Gemm)") && Contains("weight 'w'") &&
                   Contains("not a fixed positive number"));
  }
  SECTION("raw data of the wrong size") {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .init("w", {4, 3})
        .node("Gemm", {"x", "w"}, {"y"}, {attrInt("transB", 1)})
        .output("y", 2);
    b.model.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(
        40);
    CHECK_THAT(errorText(b.import()),
               Contains("'test.onnx'") && Contains("tensor 'w' has 40 bytes"));
  }
}

TEST_CASE("hostile attribute values are refused, not trusted",
          "[onnx][errors]") {
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
  auto conv = [](std::vector<pb::AttributeProto> attrs,
                 std::vector<int64_t> in = {1, 1, 8, 8}) {
    OnnxBuilder b;
    b.input("x", in)
        .init("w", {1, 1, 3, 3})
        .node("Conv", {"x", "w"}, {"y"}, attrs, "c")
        .output("y", static_cast<int>(in.size()));
    return errorText(b.import());
  };
  // ONNX 1.12's shape inference crashes on this one; memfit refuses it
  // before inference runs.
  CHECK_THAT(conv({attrInts("pads", {1, 1, 1, 1})}, {8, 8}),
             Contains("'c' (Conv)"));
  CHECK_THAT(conv({attrInts("strides", {kBig, 1})}),
             Contains("'c' (Conv)") && Contains("invalid"));
  CHECK_THAT(conv({attrInts("pads", {-1, 0, 0, 0})}), Contains("'c' (Conv)"));
  CHECK_THAT(conv({attrInts("dilations", {1 << 30, 1})}),
             Contains("'c' (Conv)"));
  CHECK_THAT(conv({attrInts("strides", {1, 1, 1})}),
             Contains("'c' (Conv)") && Contains("one per spatial axis"));

  SECTION("Gather index out of range") {
    OnnxBuilder b;
    b.input("x", {-1, 3})
        .node("Shape", {"x"}, {"s"})
        .constInt64("i", {1}, {kBig})
        .node("Gather", {"s", "i"}, {"n"}, {}, "g")
        .constInt64("m1", {1}, {-1})
        .node("Concat", {"n", "m1"}, {"t"}, {attrInt("axis", 0)})
        .node("Reshape", {"x", "t"}, {"y"})
        .output("y", 2);
    CHECK_THAT(errorText(b.import(batchOf(2))),
               Contains("'g' (Gather)") && Contains("out of range"));
  }
  SECTION("Slice with extreme bounds and steps") {
    auto sliced = [&](int64_t step) {
      OnnxBuilder b;
      b.input("x", {-1, 3, 4})
          .node("Shape", {"x"}, {"s"})
          .constInt64("st", {1}, {kBig})
          .constInt64("en", {1}, {std::numeric_limits<int64_t>::min()})
          .constInt64("ax", {1}, {0})
          .constInt64("sp", {1}, {step})
          .node("Slice", {"s", "st", "en", "ax", "sp"}, {"r"})
          .node("Reshape", {"x", "r"}, {"y"}, {}, "rs")
          .output("y", step == -1 ? 3 : 1);
      return errorText(b.import(batchOf(2)));
    };
    // Backwards from the end, [N, 3, 4] gives [4, 3, N], and with the
    // most negative step only [4]: either way the batch would move.
    CHECK_THAT(sliced(-1), Contains("'rs' (Reshape)") &&
                               Contains("target shape [4, 3, N]"));
    CHECK_THAT(sliced(std::numeric_limits<int64_t>::min()),
               Contains("'rs' (Reshape)") && Contains("target shape [4] "));
  }
  SECTION("Reshape to a huge shape") {
    OnnxBuilder b;
    b.input("x", {-1, 3})
        .initInt64("t", {3}, {0, kBig, kBig})
        .node("Reshape", {"x", "t"}, {"y"}, {}, "rs")
        .output("y", 3);
    CHECK_THAT(errorText(b.import(batchOf(2))), Contains("'rs' (Reshape)"));
  }
}

TEST_CASE("only regular files are read", "[onnx][errors][file]") {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  CHECK_THAT(errorText(importOnnxFile("/dev/null")),
             Contains("'/dev/null'") && Contains("not a regular file"));
  llvm::sys::fs::create_directory(dir.file("sub.bin"));
  OnnxBuilder b = convModel();
  makeExternal(b, "sub.bin");
  dir.write("m.onnx", b.bytes());
  CHECK_THAT(errorText(importOnnxFile(dir.file("m.onnx"))),
             Contains("sub.bin' of tensor 'w' is not a regular file"));
}

TEST_CASE("a Gemm bias of one element for several features", "[onnx][errors]") {
  // The kernels read one bias per output feature; a scalar C broadcast over
  // four would be read past its end.
  for (std::vector<int64_t> cdims : {std::vector<int64_t>{}, {1}, {1, 1}}) {
    OnnxBuilder b;
    b.input("x", {2, 3})
        .init("w", {4, 3})
        .init("c", cdims)
        .node("Gemm", {"x", "w", "c"}, {"y"}, {attrInt("transB", 1)}, "fc")
        .output("y", 2);
    CHECK_THAT(errorText(b.import()),
               Contains("'fc' (Gemm)") &&
                   Contains("must broadcast per output feature ([4] or "
                            "[1, 4])"));
  }
  // One output feature takes it.
  OnnxBuilder b;
  b.input("x", {2, 3})
      .init("w", {1, 3})
      .init("c", {1})
      .node("Gemm", {"x", "w", "c"}, {"y"}, {attrInt("transB", 1)}, "fc")
      .output("y", 2);
  CHECK(importOk(b).ops.size() == 1);
}

TEST_CASE("a Split size below zero", "[onnx][errors]") {
  // The other sizes cover the axis: without the check the second output
  // would start before it.
  OnnxBuilder b(17);
  b.input("x", {-1, 4})
      .constInt64("sizes", {2}, {-1, 4})
      .node("Split", {"x", "sizes"}, {"a", "c"}, {attrInt("axis", 1)}, "sp")
      .output("c", 2);
  CHECK_THAT(errorText(b.import(batchOf(2))),
             Contains("'sp' (Split)") && Contains("negative size"));
}

TEST_CASE("a Slice bound that is the batch size on another axis",
          "[onnx][errors]") {
  // x[:, :x.size(0)]: the end holds the batch the model is imported at,
  // wrong at every other batch size a plan runs.
  OnnxBuilder b(17);
  b.input("x", {-1, 8})
      .node("Shape", {"x"}, {"s"})
      .constInt64("i0", {}, {0})
      .node("Gather", {"s", "i0"}, {"n"}, {attrInt("axis", 0)})
      .constInt64("ax0", {1}, {0})
      .node("Unsqueeze", {"n", "ax0"}, {"end"})
      .constInt64("start", {1}, {0})
      .constInt64("axis1", {1}, {1})
      .node("Slice", {"x", "start", "end", "axis1"}, {"y"}, {}, "sl")
      .output("y", 2);
  CHECK_THAT(errorText(b.import(batchOf(2))),
             Contains("'sl' (Slice)") &&
                 Contains("a bound that is the batch size"));
}
