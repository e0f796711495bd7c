//===- Comm.h - Collectives among the ranks of a data-parallel trainer ----===//
//
// What a trainer needs of its peers: its rank, and sums and gathers of
// float buffers split into per-rank slices (each ceil(count / size) long,
// the last ones shorter, as Autodiff.cpp's shardWeightSide sizes them). The
// generated main picks the implementation: serialComm() (one rank, nothing
// to do) or mpiComm() (runtime/comm/Mpi.cpp, Open MPI: the trainer runs
// under mpirun), so that one-rank trainers never link MPI.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_COMM_H
#define MEMFIT_RUNTIME_COMM_H

#include <algorithm>
#include <cstdint>
#include <utility>

namespace memfit::rt {

class Comm {
public:
  virtual ~Comm() = default;
  virtual void init(int *argc, char ***argv) = 0;
  virtual void finalize() = 0;
  virtual int rank() = 0;
  virtual int size() = 0;
  /// Every rank's `data` becomes the sum over the ranks.
  virtual void allReduceSum(float *data, int64_t count) = 0;
  /// This rank's slice of `data` becomes the sum over the ranks of that
  /// slice; the rest of `data` is left as it was.
  virtual void reduceScatterSum(float *data, int64_t count) = 0;
  /// Every rank's slice of `data` reaches every rank.
  virtual void allGather(float *data, int64_t count) = 0;
  /// Rank `root`'s bytes to every rank (NCCL's unique id).
  virtual void broadcastBytes(void *data, int64_t bytes, int root) = 0;
  /// A double summed over the ranks (losses).
  virtual double sum(double v) = 0;
  /// Stops every rank (an error on one).
  [[noreturn]] virtual void abortAll(int code) = 0;

  /// Rank r's slice of `count` elements: [first, second).
  static std::pair<int64_t, int64_t> slice(int64_t count, int r, int ranks) {
    int64_t per = (count + ranks - 1) / ranks;
    int64_t lo = std::min(count, per * r);
    return {lo, std::min(count, lo + per)};
  }
  std::pair<int64_t, int64_t> mySlice(int64_t count) {
    return slice(count, rank(), size());
  }
};

Comm &serialComm();
Comm &mpiComm(); // in memfit_comm_mpi

} // namespace memfit::rt

#endif
