//===- HostDevice.h - Functions of both backends ----------------*- C++ -*-===//
//
// MEMFIT_HD marks a kernel function compiled twice: by nvcc for the device
// (and host) in the CUDA backend, by the host compiler into the CPU
// emulation (runtime/kernels/*.h).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_HOSTDEVICE_H
#define MEMFIT_RUNTIME_KERNELS_HOSTDEVICE_H

#ifdef __CUDACC__
#define MEMFIT_HD __host__ __device__ __forceinline__
#else
#define MEMFIT_HD inline
#endif

#endif
