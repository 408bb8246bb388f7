/* An MPI program that checks what it moves, for runs over the tt libfabric provider
 * (tests/libfabric_provider_test.cpp): point-to-point in every size class (eager and large,
 * MPI_Send, MPI_Ssend, MPI_Isend/Irecv), MPI_Allreduce and MPI_Alltoall. Prints one line per
 * part and "mpi_fabric_check: OK" at the end; any wrong byte aborts with a non-zero status. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void fail(const char* what, long at) {
  fprintf(stderr, "mpi_fabric_check: rank %d: %s (at %ld)\n", rank, what, at);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static unsigned char pattern(int from, int to, long i) { return (unsigned char)(from * 31 + to * 17 + i * 7 + (i >> 8)); }

/* Every rank sends `bytes` to the next and receives from the previous, by `mode`. */
static void ring(long bytes, int mode) {
  unsigned char* out = malloc((size_t)bytes + 1);
  unsigned char* in = malloc((size_t)bytes + 1);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (long i = 0; i < bytes; ++i) out[i] = pattern(rank, next, i);
  memset(in, 0, (size_t)bytes + 1);
  MPI_Request req[2];
  if (mode == 0) { /* blocking: even ranks send first */
    if (rank % 2 == 0) {
      MPI_Send(out, (int)bytes, MPI_BYTE, next, 7, MPI_COMM_WORLD);
      MPI_Recv(in, (int)bytes, MPI_BYTE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(in, (int)bytes, MPI_BYTE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(out, (int)bytes, MPI_BYTE, next, 7, MPI_COMM_WORLD);
    }
  } else if (mode == 1) { /* synchronous send */
    MPI_Irecv(in, (int)bytes, MPI_BYTE, prev, 8, MPI_COMM_WORLD, &req[0]);
    MPI_Ssend(out, (int)bytes, MPI_BYTE, next, 8, MPI_COMM_WORLD);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
  } else { /* non-blocking both ways */
    MPI_Irecv(in, (int)bytes, MPI_BYTE, prev, 9, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(out, (int)bytes, MPI_BYTE, next, 9, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
  }
  for (long i = 0; i < bytes; ++i) {
    if (in[i] != pattern(prev, rank, i)) fail("point-to-point: wrong byte", i);
  }
  free(out);
  free(in);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long sizes[] = {0, 1, 64, 4096, 65536, 1 << 20, 8 << 20};
  const char* modes[] = {"MPI_Send", "MPI_Ssend", "MPI_Isend"};
  for (int m = 0; m < 3; ++m) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) ring(sizes[s], m);
    if (rank == 0) printf("point-to-point %s: 0 B to 8 MiB verified\n", modes[m]);
  }

  /* Allreduce: the sum over ranks of (rank + 1) * (i + 1), per element. */
  const int n = 100000;
  int64_t* v = malloc(sizeof(int64_t) * (size_t)n);
  int64_t* sum = malloc(sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; ++i) v[i] = (int64_t)(rank + 1) * (i + 1);
  MPI_Allreduce(v, sum, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  const int64_t ranks = (int64_t)size * (size + 1) / 2;
  for (int i = 0; i < n; ++i) {
    if (sum[i] != ranks * (i + 1)) fail("MPI_Allreduce: wrong sum", i);
  }
  if (rank == 0) printf("MPI_Allreduce: %d int64 summed over %d ranks, verified\n", n, size);

  /* Alltoall: block j of rank r's send buffer goes to rank j, and says who sent it to whom. */
  const int per = 4096;
  int32_t* out = malloc(sizeof(int32_t) * (size_t)per * (size_t)size);
  int32_t* in = malloc(sizeof(int32_t) * (size_t)per * (size_t)size);
  for (int j = 0; j < size; ++j) {
    for (int k = 0; k < per; ++k) out[j * per + k] = rank * 1000000 + j * 10000 + k;
  }
  MPI_Alltoall(out, per, MPI_INT32_T, in, per, MPI_INT32_T, MPI_COMM_WORLD);
  for (int j = 0; j < size; ++j) {
    for (int k = 0; k < per; ++k) {
      if (in[j * per + k] != j * 1000000 + rank * 10000 + k) fail("MPI_Alltoall: wrong element", j * per + k);
    }
  }
  if (rank == 0) printf("MPI_Alltoall: %d int32 per pair over %d ranks, verified\n", per, size);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_fabric_check: OK\n");
  free(v), free(sum), free(out), free(in);
  MPI_Finalize();
  return 0;
}
