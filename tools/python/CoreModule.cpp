//===- CoreModule.cpp - memfit._core: the commands in-process -------------===//
//
// The Python package's only native part: it runs one memfit command line
// (tools/memfit/Driver.h) in a fork of this process and hands back its exit
// status, the kind of error it ended with, and what it printed. Everything
// else, from exporting a torch module to reading plan.json, is Python
// (tools/python/memfit). Running the CLI's own code is what makes a plan
// made from Python the CLI's, byte for byte.
//
//===----------------------------------------------------------------------===//
#include "tools/memfit/Driver.h"

#include "llvm/Support/raw_ostream.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace nb = nanobind;

namespace {

/// An anonymous file a child writes one of its descriptors into.
struct Spool {
  std::FILE *file = std::tmpfile();
  ~Spool() {
    if (file)
      std::fclose(file);
  }
  std::string text() const {
    std::string t;
    if (!file)
      return t;
    std::rewind(file);
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file)) > 0)
      t.append(buf, n);
    return t;
  }
};

const char *kindName(int kind) {
  switch (static_cast<memfit::tool::ErrorKind>(kind)) {
  case memfit::tool::ErrorKind::None:
    return "";
  case memfit::tool::ErrorKind::User:
    return "user";
  case memfit::tool::ErrorKind::Infeasible:
    return "infeasible";
  case memfit::tool::ErrorKind::Internal:
    return "internal";
  case memfit::tool::ErrorKind::Usage:
    return "usage";
  }
  return "internal";
}

/// Runs the command line in a child process: llvm::cl's options are
/// process-wide and keep what a parse set (a bool flag without an initial
/// value cannot be reset), so each command needs the state the process had
/// before any parse, which a fork of this never-parsing process has. The
/// child is also where a crash or an abort in memfit ends, not the Python
/// process. Its status carries the exit code and the error kind.
std::tuple<int, std::string, std::string, std::string>
run(const std::vector<std::string> &args) {
  std::vector<const char *> argv;
  argv.push_back("memfit");
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  argv.push_back(nullptr);
  Spool out, err;
  if (!out.file || !err.file)
    throw std::runtime_error("memfit: cannot create a temporary file");
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("memfit: fork: ") +
                             std::strerror(errno));
  if (pid == 0) {
    // The child: no Python from here on, and _exit, so nothing of the
    // parent's (atexit handlers, buffered streams) runs twice.
    ::dup2(::fileno(out.file), 1);
    ::dup2(::fileno(err.file), 2);
    int rc = memfit::tool::runCommandLine((int)argv.size() - 1, argv.data());
    llvm::outs().flush();
    llvm::errs().flush();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit((rc & 15) | (static_cast<int>(memfit::tool::lastErrorKind()) << 4));
  }
  int status = 0;
  {
    nb::gil_scoped_release release;
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR)
        break;
      // Ctrl-C in the interpreter stops the command.
      nb::gil_scoped_acquire hold;
      if (PyErr_CheckSignals() != 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        throw nb::python_error();
      }
    }
  }
  if (WIFSIGNALED(status)) {
    std::string e = err.text();
    e += "memfit: internal error: the command stopped on signal " +
         std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) +
         "; please report this with the command line)\n";
    return {2, "internal", out.text(), e};
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
  return {code & 15, kindName(code >> 4), out.text(), err.text()};
}

} // namespace

NB_MODULE(_core, m) {
  m.doc() = "memfit's command line, run in this process";
  m.def("run", &run, nb::arg("args"),
        "Runs `memfit ARGS...`; returns (exit status, error kind: '' or "
        "'user', 'infeasible', 'internal', 'usage', stdout, stderr).");
}
