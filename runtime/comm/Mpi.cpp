//===- Mpi.cpp - Collectives among ranks through MPI ----------------------===//
//
// The CPU emulation's data parallelism: ranks are processes started by
// mpirun, each running the same plan on its slice of the batch. MPI's
// reductions give every rank the same sums, so the ranks' weights stay
// bit-identical.
//
//===----------------------------------------------------------------------===//
#include "runtime/Comm.h"

#include <mpi.h>

#include <cstdlib>
#include <vector>

namespace memfit::rt {
namespace {

// MPI counts are int: buffers past 2^30 elements go in pieces.
constexpr int64_t kPiece = int64_t(1) << 30;

class Mpi final : public Comm {
public:
  void init(int *argc, char ***argv) override { MPI_Init(argc, argv); }
  void finalize() override { MPI_Finalize(); }
  int rank() override {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  int size() override {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
  }

  void allReduceSum(float *data, int64_t count) override {
    for (int64_t at = 0; at < count; at += kPiece)
      MPI_Allreduce(MPI_IN_PLACE, data + at,
                    static_cast<int>(std::min(kPiece, count - at)), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
  }

  void reduceScatterSum(float *data, int64_t count) override {
    if (count >= kPiece) { // rare: whole sums, each rank keeps its slice
      allReduceSum(data, count);
      return;
    }
    std::vector<int> counts, displs;
    countsOf(count, counts, displs);
    int r = rank();
    std::vector<float> mine(std::max(1, counts[r]));
    MPI_Reduce_scatter(data, mine.data(), counts.data(), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD);
    std::copy(mine.begin(), mine.begin() + counts[r], data + displs[r]);
  }

  void allGather(float *data, int64_t count) override {
    int n = size();
    if (count >= kPiece) { // every slice from its owner, in turn
      for (int r = 0; r < n; ++r) {
        auto [lo, hi] = slice(count, r, n);
        for (int64_t at = lo; at < hi; at += kPiece)
          MPI_Bcast(data + at, static_cast<int>(std::min(kPiece, hi - at)),
                    MPI_FLOAT, r, MPI_COMM_WORLD);
      }
      return;
    }
    std::vector<int> counts, displs;
    countsOf(count, counts, displs);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(),
                   displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
  }

  void broadcastBytes(void *data, int64_t bytes, int root) override {
    MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
  }

  double sum(double v) override {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }

  [[noreturn]] void abortAll(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }

private:
  void countsOf(int64_t count, std::vector<int> &counts,
                std::vector<int> &displs) {
    int n = size();
    counts.resize(n);
    displs.resize(n);
    for (int r = 0; r < n; ++r) {
      auto [lo, hi] = slice(count, r, n);
      counts[r] = static_cast<int>(hi - lo);
      displs[r] = static_cast<int>(lo);
    }
  }
};

} // namespace

Comm &mpiComm() {
  static Mpi m;
  return m;
}

} // namespace memfit::rt
